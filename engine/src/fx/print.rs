//! Printing graphs: as code (like `print(gm.graph)`) and as a table (like
//! `gm.graph.print_tabular()`), each node with the learner's source line.
//!
//! Shapes print symbolically (`f32[s0, 16]`), and a `cond` node's branches print after the graph
//! that holds them, named `true_graph_0`, `false_graph_0`, ... as FX names them.

use std::fmt;

use super::graph::{Arg, Graph, Node, NodeKind};
use crate::device::Device;
use crate::op::Op;

impl Node {
    /// The value's dtype, symbolic shape and (when not the CPU) device: `f32[s0, 16]`.
    pub fn meta_text(&self) -> String {
        let device = if self.meta.device == Device::Cpu { String::new() } else { format!(" {}", self.meta.device) };
        format!("{}{}{device}", self.meta.dtype, self.sym_shape)
    }
}

impl Graph {
    /// `%name` for a node argument, the scalar's value otherwise.
    fn arg_text(&self, arg: &Arg) -> String {
        match arg {
            Arg::Node(id) => format!("%{}", self.node(*id).name),
            Arg::Scalar(s) => s.to_string(),
        }
    }

    /// A call's arguments then its parameters as keywords: `%x, 2.0` or `%x, dim=1, keepdim=false`.
    /// Size parameters of a dynamic node print symbolically; a `cond` names its branches.
    fn args_text(&self, node: &Node) -> String {
        let mut parts: Vec<String> = node.args().iter().map(|a| self.arg_text(a)).collect();
        match node.op() {
            Some(Op::Reshape { .. } | Op::Expand { .. }) if !node.sym_shape.is_static() => {
                parts.push(format!("shape={}", node.sym_shape));
            }
            Some(Op::Cond { .. }) => {
                let i = self.cond_index(node);
                parts.push(format!("true_fn=true_graph_{i}, false_fn=false_graph_{i}"));
            }
            Some(op) => parts.extend(op.params().into_iter().map(|(k, v)| format!("{k}={v}"))),
            None => {}
        }
        parts.join(", ")
    }

    /// Which `cond` of this graph the node is, counting from 0.
    fn cond_index(&self, node: &Node) -> usize {
        self.nodes()
            .iter()
            .take_while(|n| !std::ptr::eq(*n, node))
            .filter(|n| matches!(n.op(), Some(Op::Cond { .. })))
            .count()
    }

    /// The graph as an aligned table with one row per node: opcode, name, target, args, the
    /// value's metadata and the source line.
    pub fn tabular(&self) -> String {
        let header = ["opcode", "name", "target", "args", "meta", "source"].map(String::from);
        let mut rows = vec![header];
        for node in self.nodes() {
            let (opcode, target, args) = match &node.kind {
                NodeKind::Placeholder { .. } => ("placeholder", node.name.clone(), String::new()),
                NodeKind::Call { op, .. } => {
                    ("call_function", op.name().to_string(), format!("({})", self.args_text(node)))
                }
            };
            let source = node.location.map(|l| l.short()).unwrap_or_default();
            rows.push([opcode.into(), node.name.clone(), target, args, node.meta_text(), source]);
        }
        let outputs: Vec<String> = self.outputs().iter().map(|&o| format!("%{}", self.node(o).name)).collect();
        rows.push([
            "output".into(),
            "output".into(),
            "output".into(),
            format!("({})", outputs.join(", ")),
            String::new(),
            String::new(),
        ]);
        let widths: Vec<usize> = (0..6).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
            if i == 0 {
                let rules: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
                out.push_str(&rules.join("  "));
                out.push('\n');
            }
        }
        out
    }
}

impl fmt::Display for Graph {
    /// The graph as code: a signature with the placeholders, one line per op call with the
    /// source line as a comment, and the return.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self
            .placeholders()
            .iter()
            .map(|&p| format!("{}: {}", self.node(p).name, self.node(p).meta_text()))
            .collect();
        writeln!(f, "graph({}):", params.join(", "))?;
        let lines: Vec<(String, String)> = self
            .nodes()
            .iter()
            .filter(|n| n.op().is_some())
            .map(|n| {
                let op = n.op().expect("filtered to calls").name();
                let code = format!("%{}: {} = {op}({})", n.name, n.meta_text(), self.args_text(n));
                let comment = n.location.map(|l| format!("# {}", l.short())).unwrap_or_default();
                (code, comment)
            })
            .collect();
        let width = lines.iter().map(|(code, _)| code.chars().count()).max().unwrap_or(0);
        for (code, comment) in &lines {
            if comment.is_empty() {
                writeln!(f, "    {code}")?;
            } else {
                writeln!(f, "    {code:<width$}  {comment}")?;
            }
        }
        let outputs: Vec<String> = self.outputs().iter().map(|&o| format!("%{}", self.node(o).name)).collect();
        let trailing = if outputs.len() == 1 { "," } else { "" };
        writeln!(f, "    return ({}{trailing})", outputs.join(", "))?;
        let branches = self.nodes().iter().filter_map(|n| match n.op() {
            Some(Op::Cond { true_graph, false_graph }) => Some((true_graph, false_graph)),
            _ => None,
        });
        for (i, (true_graph, false_graph)) in branches.enumerate() {
            write!(f, "\ntrue_graph_{i} = {true_graph}\nfalse_graph_{i} = {false_graph}")?;
        }
        Ok(())
    }
}
