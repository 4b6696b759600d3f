//! Max-autotune for generated kernels, the analogue of Inductor's Triton autotuner
//! (`runtime/triton_heuristics.py`, `CachingAutotuner`): each CUDA kernel the engine printed is
//! compiled once per launch configuration it supports ([`cuda::launch_candidates`]: the block
//! size, with elements per thread kept), timed on scratch buffers of its arguments' sizes, and
//! launched from then on with the fastest.
//!
//! Choices are stored on disk per device, kernel source and extent (through
//! [`super::autotune::cached_text`]), so a warm start reads them instead of timing again.
//! `ENGINE_LOGS=autotuning` prints each table; the output code says which block size each
//! kernel runs with and why.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::autotune::{cached_text, fastest};
use crate::bench::Bench;
use crate::codecache::cache_key;
use crate::device::Device;
use crate::device::cuda::{CudaBuffer, CudaDevice, CudaError};
use crate::error::{Error, Result};
use crate::inductor::codegen::cuda;
use crate::inductor::ir::BufferName;
use crate::inductor::kernel::Kernel;
use crate::inductor::launch::Launch;
use crate::logs::{self, Artifact};

fn failed(what: &str, e: impl Into<CudaError>) -> Error {
    Error::Backend { backend: "inductor".into(), message: format!("max-autotune: {what}: {}", e.into()) }
}

/// The launch `k` runs with under max-autotune on `gpu`, and a line for the output code: timed
/// now over its candidates (compiled after `header`, the module's prelude and custom ops), or
/// read from the disk cache, keyed by `source`, the kernel as printed for its default launch.
/// `None` when there is nothing to choose.
pub(crate) fn choose_launch(
    gpu: &Arc<CudaDevice>,
    k: &Kernel,
    source: &str,
    header: &str,
) -> Result<Option<(Launch, String)>> {
    let candidates = cuda::launch_candidates(k);
    if candidates.len() < 2 || k.xnumel == 0 {
        return Ok(None);
    }
    let facts = gpu.facts();
    let key = cache_key(&[
        b"kernel-autotune-1",
        facts.name.as_bytes(),
        facts.arch().as_bytes(),
        source.as_bytes(),
        &k.xnumel.to_le_bytes(),
    ]);
    let (text, tuned) = cached_text(&key, "launch", || {
        let (best, why) = tune(gpu, k, &candidates, header)?;
        Ok(format!("{}\n{why}\n", candidates[best].block))
    })?;
    let (launch, why) = parse(&text, &candidates).ok_or_else(|| Error::Backend {
        backend: "inductor".into(),
        message: format!("max-autotune: cache entry {key}.launch is not a launch choice; delete it to tune again"),
    })?;
    if !tuned {
        logs::log(Artifact::Autotuning, || format!("{}: the launch cached on disk ({why})", k.name));
    }
    let why = if tuned { why } else { format!("{why}; cached") };
    Ok(Some((launch, format!("{}: {} threads per block ({why})", k.name, launch.block))))
}

/// The chosen candidate and why, from the text [`choose_launch`] stores: the block size, then
/// the reason.
fn parse(text: &str, candidates: &[Launch]) -> Option<(Launch, String)> {
    let mut lines = text.lines();
    let block: u32 = lines.next()?.parse().ok()?;
    let why = lines.next()?.to_string();
    candidates.iter().find(|c| c.block == block).map(|&c| (c, why))
}

/// Compiles every candidate of `k` into one module, times them on zeroed scratch buffers and
/// returns the fastest's index and why.
fn tune(gpu: &Arc<CudaDevice>, k: &Kernel, candidates: &[Launch], header: &str) -> Result<(usize, String)> {
    let names: Vec<String> = candidates.iter().map(|c| format!("{}_block{}", k.name, c.block)).collect();
    let mut source = header.to_string();
    for (name, &launch) in names.iter().zip(candidates) {
        source.push('\n');
        source.push_str(&cuda::kernel_for(k, name, launch).source);
    }
    let module = gpu.load(&source)?;
    let mut scratch: HashMap<BufferName, CudaBuffer> = HashMap::new();
    for arg in &k.args {
        if let Entry::Vacant(slot) = scratch.entry(arg.buffer) {
            let mut buffer = CudaBuffer::alloc(gpu, arg.elements.max(1)).map_err(|e| failed("scratch", e))?;
            buffer.fill_zeros().map_err(|e| failed("scratch", e))?;
            slot.insert(buffer);
        }
    }
    let ptrs: Vec<u64> = k.args.iter().map(|a| scratch[&a.buffer].ptr()).collect();
    let xnumel = k.xnumel as i64;
    let sm_count = gpu.facts().multiprocessors;
    let mut runs: Vec<Box<dyn FnMut() -> Result<()>>> = Vec::new();
    for (name, launch) in names.iter().zip(candidates) {
        let function = module.function(name)?;
        let config = LaunchConfig {
            grid_dim: (launch.grid_size(k.xnumel, sm_count), 1, 1),
            block_dim: (launch.block, 1, 1),
            shared_mem_bytes: 0,
        };
        let ptrs = &ptrs;
        runs.push(Box::new(move || {
            let mut builder = gpu.stream().launch_builder(&function);
            for ptr in ptrs {
                builder.arg(ptr);
            }
            builder.arg(&xnumel);
            // SAFETY: one pointer per argument, then the extent, as the kernel takes them; each
            // scratch buffer holds every element the kernel indexes for this extent.
            unsafe { builder.launch(config) }.map(|_| ()).map_err(|e| failed("launching a candidate", e))
        }));
    }
    let bench = Bench::new(Device::Cuda(gpu.ordinal())).warmup(3).samples(15).flush_cache(false);
    let mut refs: Vec<&mut dyn FnMut() -> Result<()>> = runs.iter_mut().map(|r| &mut **r as _).collect();
    // The engine timing its own candidates answers no exercise: no wire trips.
    let times: Vec<f64> =
        crate::wires::internal(|| bench.run_interleaved(&mut refs))?.iter().map(|t| t.median()).collect();
    let bytes: usize = k.args.iter().map(|a| 4 * a.elements).sum();
    let labels: Vec<String> = candidates.iter().map(|c| format!("{} threads", c.block)).collect();
    let header = format!("AUTOTUNE {} (xnumel {}, {:.1} MB of arguments)", k.name, k.xnumel, bytes as f64 / 1e6);
    Ok(fastest(&header, &labels, &times, |t| format!("{:>7.1} GB/s", bytes as f64 / t / 1e9)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inductor::launch::Grid;
    use proptest::prelude::*;

    proptest! {
        /// What is stored reads back as the same candidate and reason; a block size that is not a
        /// candidate (a stale entry) reads as nothing, so the caller asks for a re-tune.
        #[test]
        fn stored_choices_read_back(blocks in proptest::collection::btree_set(1u32..=32, 1..5), pick in 0usize..5, why in "[a-z ,.0-9]{0,40}") {
            let candidates: Vec<Launch> =
                blocks.iter().map(|b| Launch { block: b * 32, grid: Grid::Rows }).collect();
            let chosen = candidates[pick % candidates.len()];
            let text = format!("{}\n{why}\n", chosen.block);
            prop_assert_eq!(parse(&text, &candidates), Some((chosen, why.clone())));
            let stale = format!("{}\n{why}\n", 2048);
            prop_assert_eq!(parse(&stale, &candidates), None);
        }
    }
}
