//! Max-autotune's benchmarking at compile time, the analogue of Inductor's `select_algorithm.py`
//! (`AlgorithmSelectorCache`) and the autotune table it prints: for each matrix product, the
//! candidates (cuBLAS, the algorithms cuBLASLt's heuristics rank first for the problem, with its
//! bias and ReLU epilogue when lowering fused one, and the engine's own kernels in each of their
//! tile shapes where the product has a linear layer's layout) are timed on the GPU, and the
//! fastest is kept. [`GemmBackends`] narrows the candidates, as PyTorch's
//! `max_autotune_gemm_backends` does.
//!
//! Choices are stored on disk per device and problem (through [`crate::codecache`]), so a warm
//! start reads them instead of timing again. `ENGINE_LOGS=autotuning` prints each table; the
//! output code says which GEMM each product runs on and why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::gemm_choice::{EngineGemm, GemmChoices, GemmSpec, failed, label};
use crate::bench::Bench;
use crate::codecache::{DiskCache, cache_key};
use crate::device::Device;
use crate::device::cuda::matmul::{Dims, Operand, planned, sgemm};
use crate::device::cuda::tuned::cublaslt::{Algorithm, Epilogue, LtGemm, Problem, lt_version};
use crate::device::cuda::tuned::linear_gemm::{LinearGemm, LinearShape};
use crate::device::cuda::tuned::skinny_gemm;
use crate::device::cuda::tuned::tf32x3_gemm::{self, Tile};
use crate::device::cuda::{CudaBuffer, CudaDevice};
use crate::error::{Error, Result};
use crate::inductor::config::GemmBackends;
use crate::inductor::ir::{IrId, LoweredGraph, NodeBody};
use crate::logs::{self, Artifact};

/// cuBLASLt algorithms timed per problem, best-ranked first (Inductor's max-autotune times a
/// similar handful of GEMM configurations).
const LT_CANDIDATES: usize = 6;

/// One matmul's choice as stored on disk: the library (and algorithm) or kernel (and tile) and why.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Choice {
    Cublas,
    Lt(Algorithm),
    Skinny,
    Tf32x3(Tile),
}

impl Choice {
    /// How tables, the disk cache and the output code name it.
    fn name(&self) -> String {
        match self {
            Choice::Cublas => "cublas sgemm".into(),
            Choice::Lt(_) => "cublaslt".into(),
            Choice::Skinny => "skinny_gemm".into(),
            Choice::Tf32x3(tile) => format!("tf32x3_gemm {}", tile.name()),
        }
    }

    /// The engine kernel the choice names; `None` for the libraries.
    fn engine_kernel(&self) -> Option<EngineGemm> {
        match *self {
            Choice::Skinny => Some(EngineGemm::Skinny),
            Choice::Tf32x3(tile) => Some(EngineGemm::Tf32x3(tile)),
            Choice::Cublas | Choice::Lt(_) => None,
        }
    }
}

/// The engine's kernels that may run a product of `shape` on `gpu`.
fn engine_candidates(gpu: &CudaDevice, shape: Option<LinearShape>) -> Vec<Choice> {
    let Some(shape) = shape else { return Vec::new() };
    let skinny = skinny_gemm::fits(&shape).then_some(Choice::Skinny);
    let tensor_cores = tf32x3_gemm::supported(gpu)
        .then(|| Tile::ALL.into_iter().filter(|&t| tf32x3_gemm::fits(&shape, t)).map(Choice::Tf32x3))
        .into_iter()
        .flatten();
    skinny.into_iter().chain(tensor_cores).collect()
}

/// What each matmul of `graph` runs on under max-autotune on `gpu`, among the `backends` allowed:
/// timed now, or read from the disk cache.
pub(crate) fn choose_gemms(gpu: &Arc<CudaDevice>, graph: &LoweredGraph, backends: GemmBackends) -> Result<GemmChoices> {
    let mut choices = GemmChoices::default();
    for (i, node) in graph.nodes.iter().enumerate() {
        let NodeBody::Matmul { a, b, epilogue } = &node.body else { continue };
        let Some((left, right, dims)) = planned(&a.layout, &b.layout, &node.shape) else { continue };
        let kind = match (epilogue.bias.is_some(), epilogue.relu) {
            (false, false) => Epilogue::None,
            (true, false) => Epilogue::Bias,
            (false, true) => Epilogue::Relu,
            (true, true) => Epilogue::BiasRelu,
        };
        let label = label(i, &node.origin_name, a, b);
        let problem = Problem::new(&left, &right, dims, kind);
        let linear = LinearShape::of(&a.layout, &b.layout, &node.shape);
        let engine = if backends.engine { engine_candidates(gpu, linear) } else { Vec::new() };
        // With no engine kernel to time, the libraries are timed even when not allowed (the fallback).
        let libraries = backends.libraries || engine.is_empty();
        let tuning = Tuning {
            gpu,
            problem: &problem,
            left: &left,
            right: &right,
            dims,
            linear,
            engine,
            libraries,
            label: &label,
        };
        let (choice, why) = tuning.cached_choice()?;
        let epilogue = if kind == Epilogue::None { String::new() } else { format!(", {} epilogue", kind.name()) };
        match choice {
            Choice::Cublas => choices.notes.push(format!("{label}: cuBLAS sgemm ({why})")),
            Choice::Lt(algorithm) => {
                choices.gemms.push((IrId(i), GemmSpec::Lt { problem, algorithm }));
                choices.notes.push(format!("{label}: cuBLASLt{epilogue} ({why})"));
            }
            Choice::Skinny | Choice::Tf32x3(_) => {
                let not_fit = || Error::Io {
                    path: DiskCache::global().dir().to_path_buf(),
                    message: format!(
                        "{label}: a cached choice of {} for a product it does not fit; clear the cache",
                        choice.name()
                    ),
                };
                let shape = linear.ok_or_else(not_fit)?;
                let kernel = choice.engine_kernel().ok_or_else(not_fit)?;
                choices.gemms.push((IrId(i), GemmSpec::Engine { kernel, shape }));
                choices.notes.push(format!("{label}: {}{epilogue} ({why})", choice.name()));
            }
        }
    }
    Ok(choices)
}

/// One matmul to choose a GEMM for: its problem in cuBLASLt's terms, its operands and sizes in the
/// engine's, and how logs name it.
struct Tuning<'a> {
    gpu: &'a Arc<CudaDevice>,
    problem: &'a Problem,
    left: &'a Operand,
    right: &'a Operand,
    dims: Dims,
    /// The product's shape for the engine's kernels, where it has a linear layer's layout.
    linear: Option<LinearShape>,
    /// The engine's kernels to time.
    engine: Vec<Choice>,
    /// Whether cuBLAS and cuBLASLt are timed.
    libraries: bool,
    label: &'a str,
}

impl Tuning<'_> {
    /// The choice for the problem from the disk cache, or timed now and stored.
    fn cached_choice(&self) -> Result<(Choice, String)> {
        let Tuning { gpu, problem, label, .. } = *self;
        let facts = gpu.facts();
        let candidates = format!("libraries {}, engine {:?}", self.libraries, self.engine);
        // An algorithm is only meaningful to the cuBLASLt version that listed it.
        let version = lt_version(gpu).map_err(failed)?;
        let key = cache_key(&[
            b"gemm-autotune-3",
            facts.name.as_bytes(),
            facts.arch().as_bytes(),
            &version.to_le_bytes(),
            format!("{problem:?}").as_bytes(),
            candidates.as_bytes(),
        ]);
        let (text, tuned) = cached_text(&key, "gemm", || {
            let (choice, why) = self.tune()?;
            let head = match choice {
                Choice::Cublas => "cublas".to_string(),
                Choice::Lt(algorithm) => format!("cublaslt {}", algorithm.map(|w| format!("{w:016x}")).join(" ")),
                Choice::Skinny => "skinny".to_string(),
                Choice::Tf32x3(tile) => format!("tf32x3 {}", tile.name()),
            };
            Ok(format!("{head}\n{why}\n"))
        })?;
        let (choice, why) = parse(&text).ok_or_else(|| Error::Io {
            path: DiskCache::global().dir().join(format!("{key}.gemm")),
            message: "not a max-autotune GEMM choice; delete the file to tune again".into(),
        })?;
        if !tuned {
            logs::log(Artifact::Autotuning, || format!("{label}: the choice cached on disk ({why})"));
        }
        Ok((choice, if tuned { why } else { format!("{why}; cached") }))
    }

    /// Times every candidate for the problem on scratch buffers of its sizes and returns the fastest,
    /// with the table that chose it.
    fn tune(&self) -> Result<(Choice, String)> {
        let Tuning { gpu, problem: p, left, right, dims, label, .. } = *self;
        let scratch = |len: usize| -> Result<CudaBuffer> {
            let mut buffer = CudaBuffer::alloc(gpu, len.max(1)).map_err(failed)?;
            buffer.fill_zeros().map_err(failed)?;
            Ok(buffer)
        };
        // cuBLASLt's A is the row-major right operand, its B the left one (see `cublaslt`).
        let right_buffer = scratch(extent(p.a, p.m, p.k, p.batch))?;
        let left_buffer = scratch(extent(p.b, p.k, p.n, p.batch))?;
        let out = scratch((p.m * p.n) as usize * p.batch.max(1) as usize)?;
        let bias = scratch(p.m as usize)?;
        let bias_ptr = p.epilogue.has_bias().then(|| bias.ptr());
        let mut choices: Vec<Choice> = Vec::new();
        let mut lt_gemms: Vec<LtGemm> = Vec::new();
        if self.libraries {
            let first = LtGemm::new(gpu, *p, None).map_err(failed)?;
            for algorithm in first.algorithms(gpu, LT_CANDIDATES, 16).map_err(failed)? {
                lt_gemms.push(first.with_algorithm(gpu, algorithm).map_err(failed)?);
                choices.push(Choice::Lt(algorithm));
            }
        }
        // The engine's kernels on buffers of their own reads (they take the weight as `w[c, k]`).
        let mut engine_gemms: Vec<LinearGemm> = Vec::new();
        let mut engine_buffers = None;
        if let Some(shape) = self.linear.filter(|_| !self.engine.is_empty()) {
            let (a_len, w_len) = shape.extents();
            engine_buffers = Some((scratch(a_len)?, scratch(w_len)?));
            for kernel in self.engine.iter().filter_map(Choice::engine_kernel) {
                engine_gemms.push(kernel.load(gpu, shape)?);
            }
        }
        let mut candidates: Vec<Box<dyn FnMut() -> Result<()>>> = Vec::new();
        for gemm in &lt_gemms {
            let (l, r, o) = (left_buffer.ptr(), right_buffer.ptr(), out.ptr());
            candidates.push(Box::new(move || {
                // SAFETY: the scratch buffers hold every element the problem reaches.
                unsafe { gemm.run(gpu, l, r, o, bias_ptr) }.map_err(failed)
            }));
        }
        let (m, n, k, batch) = dims;
        let int = |v: usize| i32::try_from(v).ok();
        if let (true, Epilogue::None, Some(m), Some(n), Some(k), Some(batch)) =
            (self.libraries, p.epilogue, int(m), int(n), int(k), int(batch))
        {
            let (l, r, o) = (left.at(left_buffer.ptr()), right.at(right_buffer.ptr()), out.ptr());
            candidates.push(Box::new(move || sgemm(gpu, &l, &r, o, (m, n, k, batch)).map_err(failed)));
            choices.push(Choice::Cublas);
        }
        if let Some((a, w)) = &engine_buffers {
            choices.extend(&self.engine);
            for gemm in &engine_gemms {
                let (a, w, o, relu) = (a.ptr(), w.ptr(), out.ptr(), p.epilogue.has_relu());
                candidates.push(Box::new(move || {
                    // SAFETY: the scratch buffers hold every element the shape's sizes and strides reach.
                    unsafe { gemm.run(gpu, a, w, o, bias_ptr, relu) }.map_err(failed)
                }));
            }
        }
        let names: Vec<String> = choices
            .iter()
            .enumerate()
            .map(|(i, choice)| match choice {
                // cuBLASLt's algorithms come first, in the order its heuristic ranked them.
                Choice::Lt(_) => format!("cublaslt heuristic #{}", i + 1),
                other => other.name(),
            })
            .collect();
        let bench = Bench::new(Device::Cuda(gpu.ordinal())).warmup(3).samples(15).flush_cache(false);
        let mut refs: Vec<&mut dyn FnMut() -> Result<()>> = candidates.iter_mut().map(|c| &mut **c as _).collect();
        // The engine timing its own candidates answers no exercise: no wire trips.
        let times: Vec<f64> =
            crate::wires::internal(|| bench.run_interleaved(&mut refs))?.iter().map(|t| t.median()).collect();
        let header = format!("AUTOTUNE {label}, {} epilogue, {:.2} GFLOP", p.epilogue.name(), p.flops() / 1e9);
        let (best, why) = fastest(&header, &names, &times, |t| format!("{:>7.1} TFLOP/s", p.flops() / t / 1e12));
        Ok((choices[best], why))
    }
}

/// The text cached on disk under `key` (a file ending in `ext`), made by `tune` when absent, and
/// whether it was made now: how max-autotune's choices survive the process.
///
/// Each choice read or made is also kept in memory for the rest of the process, as Inductor's
/// `AlgorithmSelectorCache` keeps its in-memory table beside the on-disk one: a second compile in
/// the same process reads no file (each read from disk is two file reads and a checksum), while a
/// new process still reads the disk.
pub(crate) fn cached_text(key: &str, ext: &str, tune: impl FnOnce() -> Result<String>) -> Result<(String, bool)> {
    static IN_MEMORY: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);
    let name = format!("{key}.{ext}");
    let remembered = |table: &mut Option<HashMap<String, String>>| table.get_or_insert_default().get(&name).cloned();
    if let Some(text) = remembered(&mut IN_MEMORY.lock().unwrap_or_else(|e| e.into_inner())) {
        return Ok((text, false));
    }
    let (path, tuned) = DiskCache::global().get_or_build(key, ext, |path| {
        let text = tune()?;
        std::fs::write(path, text).map_err(|e| Error::Io { path: path.to_path_buf(), message: e.to_string() })
    })?;
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Io { path: path.clone(), message: e.to_string() })?;
    IN_MEMORY.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_default().insert(name, text.clone());
    Ok((text, tuned))
}

/// The fastest of the candidates `names` timed at `times` (seconds), and a line saying why, with
/// the runner-up; `ENGINE_LOGS=autotuning` prints the whole table under `header`, fastest first,
/// each row with its share of the best time and `rate` of its time.
pub(crate) fn fastest(header: &str, names: &[String], times: &[f64], rate: impl Fn(f64) -> String) -> (usize, String) {
    let best = (0..times.len()).min_by(|&x, &y| times[x].total_cmp(&times[y])).expect("at least one candidate");
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by(|&x, &y| times[x].total_cmp(&times[y]));
    logs::log(Artifact::Autotuning, || {
        let mut lines = vec![header.to_string()];
        for &i in &order {
            lines.push(format!(
                "  {:<24} {:>9.1} us {:>6.1}% {}",
                names[i],
                times[i] * 1e6,
                100.0 * times[best] / times[i],
                rate(times[i])
            ));
        }
        lines.join("\n")
    });
    let runner_up = order.get(1).map(|&i| format!(", next {} {:.1} us", names[i], times[i] * 1e6)).unwrap_or_default();
    (best, format!("fastest of {} timed: {} {:.1} us{runner_up}", times.len(), names[best], times[best] * 1e6))
}

fn parse(text: &str) -> Option<(Choice, String)> {
    let mut lines = text.lines();
    let head = lines.next()?;
    let why = lines.next()?.to_string();
    let choice = match head.split_once(' ') {
        None if head == "cublas" => Choice::Cublas,
        None if head == "skinny" => Choice::Skinny,
        Some(("tf32x3", tile)) => Choice::Tf32x3(Tile::named(tile)?),
        Some(("cublaslt", words)) => {
            let words: Vec<u64> = words.split(' ').map(|w| u64::from_str_radix(w, 16).ok()).collect::<Option<_>>()?;
            Choice::Lt(words.try_into().ok()?)
        }
        _ => return None,
    };
    Some((choice, why))
}

/// Elements a column-major operand reaches: `ld` per stored column, plus the batch's stride.
fn extent((transposed, ld, stride): (bool, i64, i64), rows: u64, cols: u64, batch: i32) -> usize {
    let stored_cols = if transposed { rows } else { cols };
    (ld as usize) * stored_cols as usize + stride.max(0) as usize * (batch.max(1) as usize - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_choice_reads_back_from_its_cached_text() {
        for tile in Tile::ALL {
            let (choice, why) = parse(&format!("tf32x3 {}\nfastest of 9 timed\n", tile.name())).unwrap();
            assert_eq!((choice, why.as_str()), (Choice::Tf32x3(tile), "fastest of 9 timed"));
        }
        assert_eq!(parse("skinny\nwhy\n").unwrap().0, Choice::Skinny);
        assert!(parse("tf32x3 64x64x8\nwhy\n").is_none(), "a tile the kernel does not have");
    }
}
