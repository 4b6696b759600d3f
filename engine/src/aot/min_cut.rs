//! Maximum flow and a minimum cut of a small directed network, the job networkx's `minimum_cut`
//! does for PyTorch's partitioner: Edmonds-Karp (augment along shortest paths found by
//! breadth-first search until none is left), then the cut between what the source still reaches
//! in the residual network and the rest.
//!
//! The networks here have two vertices per graph node and a few hundred nodes, so an adjacency
//! list with residual capacities is plenty; capacities are bytes, with [`INFINITE`] for edges that
//! may never be cut.

use std::collections::VecDeque;

/// The capacity of an edge that may never be cut (larger than any sum of finite capacities the
/// partitioner builds).
pub const INFINITE: u64 = u64::MAX / 4;

/// A flow network under construction: vertices `0..vertices`, directed edges with capacities.
pub struct Network {
    /// Per vertex, the indices of its edges (forward and reverse) in `edges`.
    adjacent: Vec<Vec<usize>>,
    /// Edge `2e` is the `e`-th edge added, `2e + 1` its reverse (capacity 0): `(to, residual)`.
    edges: Vec<(usize, u64)>,
}

impl Network {
    /// A network of `vertices` vertices and no edges.
    pub fn new(vertices: usize) -> Network {
        Network { adjacent: vec![Vec::new(); vertices], edges: Vec::new() }
    }

    /// Adds the edge `from -> to` with `capacity`.
    pub fn add_edge(&mut self, from: usize, to: usize, capacity: u64) {
        self.adjacent[from].push(self.edges.len());
        self.edges.push((to, capacity));
        self.adjacent[to].push(self.edges.len());
        self.edges.push((from, 0));
    }

    /// Sends the maximum flow from `source` to `sink` and returns its value and, for each vertex,
    /// whether it is on the source's side of a minimum cut (reachable from the source in the
    /// residual network). The cut's edges are those from a reachable vertex to an unreachable one;
    /// their capacities add up to the flow.
    pub fn min_cut(mut self, source: usize, sink: usize) -> (u64, Vec<bool>) {
        crate::wires::trip(crate::wires::Wire::MinCut);
        let mut flow: u64 = 0;
        loop {
            let (reached, via) = self.search(source);
            if !reached[sink] {
                return (flow, reached);
            }
            // The bottleneck of the path the search found, then push that much along it.
            let mut bottleneck = u64::MAX;
            let mut v = sink;
            while v != source {
                let e = via[v].expect("a reached vertex has the edge it was reached by");
                bottleneck = bottleneck.min(self.edges[e].1);
                v = self.edges[e ^ 1].0;
            }
            let mut v = sink;
            while v != source {
                let e = via[v].expect("as above");
                self.edges[e].1 -= bottleneck;
                self.edges[e ^ 1].1 += bottleneck;
                v = self.edges[e ^ 1].0;
            }
            flow = flow.saturating_add(bottleneck);
        }
    }

    /// Breadth-first search over edges with residual capacity: which vertices `source` reaches,
    /// and for each the edge it was first reached by.
    fn search(&self, source: usize) -> (Vec<bool>, Vec<Option<usize>>) {
        let mut reached = vec![false; self.adjacent.len()];
        let mut via = vec![None; self.adjacent.len()];
        reached[source] = true;
        let mut queue = VecDeque::from([source]);
        while let Some(v) = queue.pop_front() {
            for &e in &self.adjacent[v] {
                let (to, residual) = self.edges[e];
                if residual > 0 && !reached[to] {
                    reached[to] = true;
                    via[to] = Some(e);
                    queue.push_back(to);
                }
            }
        }
        (reached, via)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_of_a_chain_is_its_narrowest_edge() {
        // 0 -> 1 -> 2 -> 3 with capacities 5, 2, 7.
        let mut network = Network::new(4);
        network.add_edge(0, 1, 5);
        network.add_edge(1, 2, 2);
        network.add_edge(2, 3, 7);
        let (flow, side) = network.min_cut(0, 3);
        assert_eq!(flow, 2);
        assert_eq!(side, vec![true, true, false, false]);
    }

    #[test]
    fn parallel_paths_add_up() {
        // Two paths 0 -> 1 -> 3 (3, 4) and 0 -> 2 -> 3 (6, 1), and 1 -> 2 (10): the cheapest cut
        // takes 0 -> 1 and 2 -> 3, 3 + 1.
        let mut network = Network::new(4);
        for (a, b, c) in [(0, 1, 3), (1, 3, 4), (0, 2, 6), (2, 3, 1), (1, 2, 10)] {
            network.add_edge(a, b, c);
        }
        let (flow, side) = network.min_cut(0, 3);
        assert_eq!(flow, 4);
        assert_eq!(side, vec![true, false, true, false]);
    }
}
