//! Which kernel each matrix product of a GPU graph runs on, the analogue of Inductor's `tuned_mm`
//! choosing between `extern_kernels.mm` (cuBLAS) and its own GEMM templates.
//!
//! By default a product by a linear layer's weight runs on one of the engine's kernels, by fixed
//! rules measured on the H100, and every other product on cuBLAS:
//! - at most [`MAX_ROWS`](crate::device::cuda::tuned::skinny_gemm::MAX_ROWS) rows (a batch of 1 to 16):
//!   the skinny kernel, which reads the weight once with every SM and so runs at about the speed
//!   of reading it, faster than cuBLAS's few-row kernels;
//! - more rows, on a Hopper GPU: the tensor-core kernel at float32 accuracy (`tf32x3_gemm`),
//!   faster than cuBLAS's float32 GEMM on the MLP's and the transformer blocks' products except
//!   where few tiles cover the output and `k` is long: there cuBLAS stays. On other GPUs it was
//!   not measured, so cuBLAS stays there too.
//!
//! The measurements behind each rule are in bench/NOTES-modes.md (third and fourth rounds).
//!
//! A product of bf16 or f16 operands runs on cuBLASLt, on the tensor cores with float32
//! accumulation, with the algorithm its heuristics rank first and any bias, ReLU and residual
//! lowering folded into it applied by its epilogue (the engine's own kernels are float32 ones).
//!
//! The rules are fixed, not timed, so default and reduce-overhead compile no slower; max-autotune
//! times the same kernels, in every tile shape, against cuBLAS and cuBLASLt's algorithms instead
//! (`autotune`). The output code says which kernel each product got and why.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::device::cuda::matmul::planned;
use crate::device::cuda::tuned::cublaslt::{Algorithm, Epilogue, LtGemm, Problem};
use crate::device::cuda::tuned::linear_gemm::{LinearGemm, LinearShape};
use crate::device::cuda::tuned::skinny_gemm::{self, MAX_ROWS};
use crate::device::cuda::tuned::tf32x3_gemm::{self, Tile};
use crate::device::cuda::{CudaDevice, CudaError};
use crate::error::{Error, Result};
use crate::inductor::ir::{IrId, LoweredGraph, NodeBody, View};

/// The kernel a matrix product runs on, when it is not cuBLAS.
pub(crate) enum GemmKernel {
    /// cuBLASLt with the algorithm max-autotune timed (and the epilogue lowering folded).
    Lt(Arc<LtGemm>),
    /// One of the engine's own kernels, the few-row or the tensor-core one (applying any folded
    /// epilogue itself).
    Engine(Arc<LinearGemm>),
}

/// One of the engine's own GEMM kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum EngineGemm {
    /// The few-row kernel.
    Skinny,
    /// The tensor-core kernel in one of its tiles.
    Tf32x3(Tile),
}

impl EngineGemm {
    /// The eager kernel family (a CUDA module) its kernels come from.
    pub(crate) fn family(self) -> &'static str {
        match self {
            EngineGemm::Skinny => skinny_gemm::FAMILY,
            EngineGemm::Tf32x3(_) => tf32x3_gemm::FAMILY,
        }
    }

    /// The kernel loaded for products of `shape`.
    pub(crate) fn load(self, gpu: &Arc<CudaDevice>, shape: LinearShape) -> Result<LinearGemm> {
        match self {
            EngineGemm::Skinny => skinny_gemm::load(gpu, shape),
            EngineGemm::Tf32x3(tile) => tf32x3_gemm::load(gpu, shape, tile),
        }
        .map_err(failed)
    }
}

/// A product's kernel as data, what the FX graph cache stores: loaded by [`GemmSpec::load`] when
/// the program is built, whether the choice was just made or read back.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum GemmSpec {
    /// cuBLASLt on `problem` with the timed `algorithm`.
    Lt { problem: Problem, algorithm: Algorithm },
    /// One of the engine's kernels, on a linear layer's product of `shape`.
    Engine { kernel: EngineGemm, shape: LinearShape },
}

impl GemmSpec {
    /// The kernel family it loads, for a kernel of the engine's own (cuBLASLt needs none).
    pub(crate) fn family(&self) -> Option<&'static str> {
        match self {
            GemmSpec::Lt { .. } => None,
            GemmSpec::Engine { kernel, .. } => Some(kernel.family()),
        }
    }

    /// The kernel, ready to run on `gpu`.
    pub(crate) fn load(&self, gpu: &Arc<CudaDevice>) -> Result<GemmKernel> {
        Ok(match *self {
            GemmSpec::Lt { problem, algorithm } => {
                GemmKernel::Lt(Arc::new(LtGemm::new(gpu, problem, Some(algorithm)).map_err(failed)?))
            }
            GemmSpec::Engine { kernel, shape } => GemmKernel::Engine(Arc::new(kernel.load(gpu, shape)?)),
        })
    }
}

/// The products not on cuBLAS, by node, and one line per product for the output code.
#[derive(Default)]
pub(crate) struct GemmChoices {
    /// The chosen kernels (a matmul absent here runs on cuBLAS).
    pub gemms: Vec<(IrId, GemmSpec)>,
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

/// The tile the default rule gives the tensor-core kernel: the one max-autotune picked most often
/// on the H100 (within 2% of the best where it was not picked).
const RULE_TILE: Tile = Tile::ALL[0];

/// Output tiles of 64 x 64 that keep the GPU busy however long `k` is: about one per SM of an H100.
const MANY_TILES: usize = 128;

/// The longest `k` for which the tensor-core kernel beat cuBLAS on the H100 with few tiles.
const SHORT_K: usize = 1024;

/// Whether the default rule puts a product of `shape` on the tensor-core kernel (see the module
/// comment): a Hopper GPU, and enough tiles or a short enough `k`.
fn tensor_cores_by_rule(gpu: &CudaDevice, shape: &LinearShape) -> bool {
    let tiles = shape.rows.div_ceil(64) * shape.n.div_ceil(64);
    gpu.facts().compute_capability.0 == 9
        && tf32x3_gemm::fits(shape, RULE_TILE)
        && (tiles >= MANY_TILES || shape.k <= SHORT_K)
}

/// The default rule: half-precision products on cuBLASLt; float32 ones of few rows by a weight on
/// the skinny kernel, larger ones on the tensor-core kernel where it pays, the rest on cuBLAS.
pub(crate) fn by_rule(gpu: &Arc<CudaDevice>, graph: &LoweredGraph) -> Result<GemmChoices> {
    let mut choices = GemmChoices::default();
    for (i, node) in graph.nodes.iter().enumerate() {
        let NodeBody::Matmul { a, b, epilogue } = &node.body else { continue };
        if node.dtype.is_half() {
            let Some((left, right, dims)) = planned(&a.layout, &b.layout, &node.shape, node.dtype) else { continue };
            let kind = epilogue_kind(epilogue.bias.is_some(), epilogue.relu);
            let problem = Problem::new(&left, &right, dims, kind);
            let algorithm = LtGemm::new(gpu, problem, None).map_err(failed)?.algorithm();
            choices.gemms.push((IrId(i), GemmSpec::Lt { problem, algorithm }));
            let mut fused = if kind == Epilogue::None { String::new() } else { format!(", {} epilogue", kind.name()) };
            if epilogue.residual.is_some() {
                fused.push_str(", residual read as C");
            }
            let why = format!("{} on the tensor cores, float32 accumulation", node.dtype);
            choices.notes.push(format!("{}: cublaslt{fused} ({why})", label(i, &node.origin_name, a, b)));
            continue;
        }
        let Some(shape) = LinearShape::of(&a.layout, &b.layout, &node.shape) else { continue };
        let (kernel, note) = if skinny_gemm::fits(&shape) {
            let rows = if shape.rows == 1 { "1 row".to_string() } else { format!("{} rows", shape.rows) };
            let why = format!("{rows}, at most {MAX_ROWS}: the weight read once by every SM, instead of cuBLAS");
            (EngineGemm::Skinny, format!("skinny_gemm ({why})"))
        } else if tensor_cores_by_rule(gpu, &shape) {
            let why = "float32 on Hopper's tensor cores as three TF32 products, faster than cuBLAS's float32 GEMM";
            (EngineGemm::Tf32x3(RULE_TILE), format!("tf32x3_gemm {} ({why})", RULE_TILE.name()))
        } else {
            continue;
        };
        choices.gemms.push((IrId(i), GemmSpec::Engine { kernel, shape }));
        choices.notes.push(format!("{}: {note}", label(i, &node.origin_name, a, b)));
    }
    Ok(choices)
}

/// cuBLASLt's epilogue for a folded bias and ReLU.
pub(crate) fn epilogue_kind(bias: bool, relu: bool) -> Epilogue {
    match (bias, relu) {
        (false, false) => Epilogue::None,
        (true, false) => Epilogue::Bias,
        (false, true) => Epilogue::Relu,
        (true, true) => Epilogue::BiasRelu,
    }
}
