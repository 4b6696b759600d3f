//! `explain`, the analogue of `torch._dynamo.explain`: run a function once under capture and
//! report how it was split: graphs, graph breaks with their reasons and lines, ops per graph.

use std::fmt;

use super::capture::CallRecord;
use super::compiled::{Compiled, compile};
use super::signature::{Inputs, Outputs};
use crate::error::{Result, SourceLocation};
use crate::fx::Graph;
use crate::fx::proxy::BreakReason;
use crate::tensor::Tensor;

/// A function wrapped by [`explain`]; [`Explain::call`] runs it and returns the report.
pub struct Explain<I, O, F> {
    compiled: Compiled<I, O, F>,
}

/// Wraps `f` for one diagnostic run, like `torch._dynamo.explain(f)`: then
/// `explain(f).call(inputs)` returns an [`ExplainOutput`] that prints the graphs and breaks.
///
/// ```
/// use engine::{dynamo, Tensor};
/// let report = dynamo::explain(|x: Tensor| {
///     let y = x.relu()?;
///     let scale = y.sum_all()?.item()?; // a graph break
///     y.mul(scale)
/// })
/// .call(&Tensor::randn(&[4], 0))?;
/// assert_eq!((report.graph_count(), report.graph_break_count()), (2, 1));
/// # Ok::<(), engine::Error>(())
/// ```
#[track_caller]
pub fn explain<I, O, F>(f: F) -> Explain<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    Explain { compiled: compile(f) }
}

impl<I, O, F> Explain<I, O, F>
where
    I: Inputs,
    O: Outputs,
    F: Fn(I) -> Result<O>,
{
    /// With `true`, a `backward()` inside the function is traced into its graph (see
    /// [`Compiled::compiled_autograd`]).
    pub fn compiled_autograd(self, enabled: bool) -> Self {
        Explain { compiled: self.compiled.compiled_autograd(enabled) }
    }

    /// Runs the function once under capture (compiling each graph with the default backend,
    /// Inductor, as `compile` does) and reports.
    #[track_caller]
    pub fn call(&self, inputs: I::Ref<'_>) -> Result<ExplainOutput> {
        let (outputs, CallRecord { graphs, breaks, .. }) =
            self.compiled.call_recorded(inputs, SourceLocation::caller(), true, false)?;
        Ok(ExplainOutput { graphs, breaks, outputs: outputs.into_vec() })
    }
}

/// What [`explain`] found: the graphs in the order they ran and the breaks between them.
#[derive(Clone, Debug)]
pub struct ExplainOutput {
    /// Every graph run, in order (graphs with no op are not counted: nothing is compiled).
    pub graphs: Vec<Graph>,
    /// Every graph break, in order, with its reason and the learner's line.
    pub breaks: Vec<BreakReason>,
    /// The function's results.
    pub outputs: Vec<Tensor>,
}

impl ExplainOutput {
    /// Number of graphs.
    pub fn graph_count(&self) -> usize {
        crate::wires::trip(crate::wires::Wire::GraphCount);
        self.graphs.len()
    }

    /// Number of graph breaks.
    pub fn graph_break_count(&self) -> usize {
        crate::wires::trip(crate::wires::Wire::GraphBreakCount);
        self.breaks.len()
    }

    /// Number of op calls over all graphs.
    pub fn op_count(&self) -> usize {
        crate::wires::trip(crate::wires::Wire::ExplainOpCount);
        self.graphs.iter().map(Graph::calls).sum()
    }

    /// The op names of each graph, in order.
    pub fn ops_per_graph(&self) -> Vec<Vec<&'static str>> {
        crate::wires::trip(crate::wires::Wire::OpsPerGraph);
        self.graphs.iter().map(|g| g.nodes().iter().filter_map(|n| n.op().map(|op| op.name())).collect()).collect()
    }
}

impl fmt::Display for ExplainOutput {
    /// The report in the layout of `torch._dynamo.explain`'s output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Graph count: {}", self.graph_count())?;
        writeln!(f, "Graph break count: {}", self.graph_break_count())?;
        writeln!(f, "Op count: {}", self.op_count())?;
        writeln!(f, "Break reasons:")?;
        for (i, b) in self.breaks.iter().enumerate() {
            writeln!(f, "  Break {}: {}", i + 1, b.reason)?;
            writeln!(f, "    at {}", b.location.short())?;
        }
        crate::wires::trip(crate::wires::Wire::OpsPerGraph);
        writeln!(f, "Ops per graph:")?;
        for (i, graph) in self.graphs.iter().enumerate() {
            writeln!(f, "  Graph {}:", i + 1)?;
            for node in graph.nodes().iter().filter(|n| n.op().is_some()) {
                let at = node.location.map(|l| l.short()).unwrap_or_default();
                writeln!(f, "    {:<12} {at}", node.op().expect("filtered to calls").name())?;
            }
        }
        writeln!(f, "Graphs:")?;
        for (i, graph) in self.graphs.iter().enumerate() {
            write!(f, "  Graph {}: {graph}", i + 1)?;
        }
        Ok(())
    }
}
