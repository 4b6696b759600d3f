//! Which kernel each matrix product of a GPU graph runs on, the analogue of Inductor's `tuned_mm`
//! choosing between `extern_kernels.mm` (cuBLAS) and its own GEMM templates.
//!
//! By default a product runs on cuBLAS, except a product of at most
//! [`MAX_ROWS`](crate::device::cuda::skinny_gemm::MAX_ROWS) rows by a linear layer's weight (a
//! batch of 1 to 16): that one runs on the engine's skinny GEMM kernel, which reads the weight once
//! with every SM and so runs at about the speed of reading it, where cuBLAS's few-row kernels took
//! 3-5 times longer on the H100. The rule is fixed, not timed, so default and reduce-overhead
//! compile no slower; max-autotune times the same kernel against cuBLAS and cuBLASLt instead
//! (`autotune`), with the engine's tensor-core kernel and cuBLASLt's algorithms. The output code
//! says which kernel each product got and why.

use std::collections::HashMap;
use std::sync::Arc;

use super::ir::{IrId, LoweredGraph, NodeBody, View};
use crate::device::cuda::cublaslt::LtGemm;
use crate::device::cuda::linear_gemm::{LinearGemm, LinearShape};
use crate::device::cuda::skinny_gemm::{self, MAX_ROWS};
use crate::device::cuda::{CudaDevice, CudaError};
use crate::error::{Error, Result};

/// The kernel a matrix product runs on, when it is not cuBLAS.
pub(crate) enum GemmKernel {
    /// cuBLASLt with the algorithm max-autotune timed (and the epilogue lowering folded).
    Lt(Arc<LtGemm>),
    /// One of the engine's own kernels, the few-row or the tensor-core one (applying any folded
    /// epilogue itself).
    Engine(Arc<LinearGemm>),
}

/// The products not on cuBLAS, by node, and one line per product for the output code.
#[derive(Default)]
pub(crate) struct GemmChoices {
    /// The chosen kernels (a matmul absent here runs on cuBLAS).
    pub gemms: HashMap<IrId, GemmKernel>,
    /// What was chosen for each matmul, and why.
    pub notes: Vec<String>,
}

pub(crate) fn failed(e: CudaError) -> Error {
    Error::Backend { backend: "inductor".into(), message: format!("choosing a GEMM: {e}") }
}

/// How the output code names a product: its buffer, the FX node it came from, its operands' shapes.
pub(crate) fn label(i: usize, origin: &str, a: &View, b: &View) -> String {
    format!("buf{i} = %{origin} {:?} @ {:?}", a.layout.shape(), b.layout.shape())
}

/// The default rule: every product of few rows by a weight on the skinny kernel, the rest on cuBLAS.
pub(crate) fn by_rule(gpu: &Arc<CudaDevice>, graph: &LoweredGraph) -> Result<GemmChoices> {
    let mut choices = GemmChoices::default();
    for (i, node) in graph.nodes.iter().enumerate() {
        let NodeBody::Matmul { a, b, .. } = &node.body else { continue };
        let Some(shape) = LinearShape::of(&a.layout, &b.layout, &node.shape).filter(skinny_gemm::fits) else {
            continue;
        };
        let gemm = skinny_gemm::load(gpu, shape).map_err(failed)?;
        choices.gemms.insert(IrId(i), GemmKernel::Engine(Arc::new(gemm)));
        let rows = if shape.rows == 1 { "1 row".to_string() } else { format!("{} rows", shape.rows) };
        choices.notes.push(format!(
            "{}: skinny_gemm ({rows}, at most {MAX_ROWS}: the weight read once by every SM, instead of cuBLAS)",
            label(i, &node.origin_name, a, b)
        ));
    }
    Ok(choices)
}
