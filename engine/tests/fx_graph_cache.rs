//! The FX graph cache (`engine::inductor::modes::fx_graph_cache`): a second compile of a graph is served
//! from disk with the same output code and the same bits; a corrupt entry is reported and
//! compiled again; replacement printers, another fusion decision and dynamic graphs are never
//! cached; another mode or shape is another entry. GPU tests print `skipped: <reason>` and pass
//! where there is no GPU.
//!
//! Every test runs against one fresh cache directory for this process (see [`fresh_cache`]), so
//! the first compile of each graph is a miss however warm the user's cache is. Each test reads
//! the cache's decisions from its own thread's log capture, so tests running in parallel do not
//! see each other's.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{close_to_eager, gpu};
use engine::backends::Inductor;
use engine::dynamo::{self, Mode};
use engine::inductor::modes::fx_graph_cache;
use engine::inductor::scheduler::{Decision, FusionCandidate, can_fuse};
use engine::inductor::{Config, OutputCode, Printers, codegen};
use engine::logs::{self, Artifact};
use engine::{Device, Result, Tensor};
use workbook_models::phase5::{Block, BlockShape, Mlp};

/// This process's cache directory, emptied and set as `ENGINE_CACHE_DIR` on first use. Every test
/// calls it before anything else, and the engine reads `ENGINE_CACHE_DIR` once, on its first
/// use of the disk cache, which no test reaches before this has returned.
fn fresh_cache() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("engine-fx-graph-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // SAFETY: the other test threads are either blocked on this `OnceLock` or have not started
        // (each test's first statement is this call), so nothing reads the environment meanwhile.
        unsafe { std::env::set_var("ENGINE_CACHE_DIR", &dir) };
        dir
    })
}

/// One compile and call of `f` on `inputs`: its outputs, its output code and the FX graph cache's
/// and the fusion log lines (with any warning) on this thread.
struct Compiled {
    outputs: Vec<Tensor>,
    code: OutputCode,
    log: String,
}

fn compile_and_call(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    mode: Mode,
    config: Config,
    dynamic: bool,
) -> Compiled {
    let inductor = Inductor::with_config(config);
    let compiled = dynamo::compile(|xs: Vec<Tensor>| f(&xs)).backend(inductor.clone()).mode(mode).dynamic(dynamic);
    let (outputs, log) = logs::capture(&[Artifact::FxGraphCache, Artifact::Fusion, Artifact::Warnings], || {
        compiled.call(inputs).unwrap()
    });
    Compiled { outputs: vec![outputs], code: inductor.output_codes().remove(0), log }
}

fn bits(tensors: &[Tensor]) -> Vec<Vec<u32>> {
    tensors.iter().map(|t| t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()).collect()
}

/// The key the log says an entry was stored under.
fn stored_key(log: &str) -> &str {
    log.lines()
        .find_map(|l| l.strip_prefix("[engine:fx_graph_cache] stored "))
        .unwrap_or_else(|| panic!("no entry stored:\n{log}"))
}

/// The fusion log's lines in `log`.
fn fusion_lines(log: &str) -> String {
    log.lines().filter(|l| l.starts_with("[engine:fusion]")).collect::<Vec<_>>().join("\n")
}

/// A compile, then a second compile of the same function: a miss that stores, then a hit with the
/// same output code, the same fusion log and outputs equal bit for bit. Returns the hit's fusion
/// log.
fn second_compile_hits(f: impl Fn(&[Tensor]) -> Result<Tensor> + Copy, inputs: &[Tensor], mode: Mode) -> String {
    let hits = fx_graph_cache::counters().hits;
    let first = compile_and_call(f, inputs, mode, Config::default(), false);
    assert!(first.log.contains("] miss ") && first.log.contains("] stored "), "{}", first.log);
    let second = compile_and_call(f, inputs, mode, Config::default(), false);
    assert!(second.log.contains("] hit "), "{}", second.log);
    assert!(fx_graph_cache::counters().hits > hits);
    assert_eq!(second.code, first.code);
    assert_eq!(second.code.to_string(), first.code.to_string());
    assert_eq!(bits(&second.outputs), bits(&first.outputs));
    assert_eq!(fusion_lines(&second.log), fusion_lines(&first.log), "a hit prints the fusion log of the compile");
    fusion_lines(&second.log)
}

/// A transformer block small enough to compile quickly on the CPU, with attention and both layer
/// norms as in the benchmarked ones.
const TINY_BLOCK: BlockShape = BlockShape { batch: 2, seq: 16, d_model: 64, heads: 4 };

#[test]
fn the_naive_block_compiled_again_is_a_hit_with_the_same_code_and_bits() {
    fresh_cache();
    let block = Block::new(TINY_BLOCK, 1, Device::Cpu).unwrap();
    let x = Tensor::randn(&[TINY_BLOCK.batch, TINY_BLOCK.seq, TINY_BLOCK.d_model], 2);
    let forward = |xs: &[Tensor]| block.naive_forward(&xs[0]);
    let fusion = second_compile_hits(forward, &[x], Mode::Default);
    // The pattern rewrites' lines too, though a hit rewrites nothing.
    assert!(fusion.contains("pattern `attention:") && fusion.contains("pattern `concat linear`"), "{fusion}");
}

#[test]
fn the_mlp_compiled_again_is_a_hit_in_every_mode() {
    fresh_cache();
    let mlp = Mlp::new(3, Device::Cpu).unwrap();
    let x = Tensor::randn(&[4, workbook_models::phase5::MLP_FEATURES], 4);
    for mode in Mode::ALL {
        second_compile_hits(|xs: &[Tensor]| mlp.forward(&xs[0]), std::slice::from_ref(&x), mode);
    }
}

#[test]
fn a_corrupt_entry_is_reported_and_compiled_again() {
    let dir = fresh_cache();
    let f = |xs: &[Tensor]| xs[0].mul(3.0)?.tanh()?.sum(1, false);
    let x = Tensor::randn(&[7, 13], 5);
    let first = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, Config::default(), false);
    let path = dir.join(format!("{}.fxgraph", stored_key(&first.log)));
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();

    let second = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, Config::default(), false);
    assert!(second.log.contains("is corrupt") && second.log.contains("] miss "), "{}", second.log);
    assert_eq!(bits(&second.outputs), bits(&first.outputs));
    close_to_eager(&second.outputs[0], &f(std::slice::from_ref(&x)).unwrap()).unwrap();
    assert_eq!(second.code, first.code);
    // The recompile stored a good entry again.
    let third = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, Config::default(), false);
    assert!(third.log.contains("] hit "), "{}", third.log);
}

#[test]
fn a_truncated_entry_is_compiled_again() {
    let dir = fresh_cache();
    let f = |xs: &[Tensor]| xs[0].exp()?.mul(0.5);
    let x = Tensor::randn(&[5, 11], 6);
    let first = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, Config::default(), false);
    let path = dir.join(format!("{}.fxgraph", stored_key(&first.log)));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let second = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, Config::default(), false);
    assert!(second.log.contains("is corrupt") && second.log.contains("] miss "), "{}", second.log);
    assert_eq!(bits(&second.outputs), bits(&first.outputs));
}

/// The engine's own C printer, plugged in as a replacement: same code, but the cache cannot know.
const REPLACED: Printers = Printers { pointwise_c: Some(codegen::c::kernel), pointwise_cuda: None, reduction_c: None };

/// The engine's decision, behind another function.
fn my_can_fuse(candidate: &FusionCandidate) -> Decision {
    can_fuse(candidate)
}

#[test]
fn replacement_printers_and_fusion_decisions_are_never_cached() {
    fresh_cache();
    let f = |xs: &[Tensor]| xs[0].add(&xs[1])?.relu()?.mul(2.0);
    let inputs = [Tensor::randn(&[9, 10], 7), Tensor::randn(&[9, 10], 8)];
    let configs = [
        (Config { printers: REPLACED, ..Config::default() }, "Config::printers"),
        (Config { fusion: my_can_fuse, ..Config::default() }, "Config::fusion"),
    ];
    for (config, why) in configs {
        for _ in 0..2 {
            let compiled = compile_and_call(f, &inputs, Mode::Default, config, false);
            assert!(compiled.log.contains("] bypass: ") && compiled.log.contains(why), "{}", compiled.log);
            assert!(!compiled.log.contains("] hit ") && !compiled.log.contains("] stored "), "{}", compiled.log);
        }
    }
    // The same graph with the engine's own config is cached.
    second_compile_hits(f, &inputs, Mode::Default);
}

#[test]
fn a_dynamic_graph_is_never_cached() {
    fresh_cache();
    let f = |xs: &[Tensor]| xs[0].sin()?.add(1.0);
    for _ in 0..2 {
        let compiled = compile_and_call(f, &[Tensor::randn(&[6, 3], 9)], Mode::Default, Config::default(), true);
        assert!(compiled.log.contains("] bypass: dynamic shapes"), "{}", compiled.log);
    }
}

#[test]
fn another_mode_or_shape_is_a_miss_and_the_switch_turns_the_cache_off() {
    fresh_cache();
    let f = |xs: &[Tensor]| xs[0].cos()?.mul(4.0);
    let x = Tensor::randn(&[8, 12], 10);
    let miss = |x: &Tensor, mode| {
        let compiled = compile_and_call(f, std::slice::from_ref(x), mode, Config::default(), false);
        assert!(compiled.log.contains("] miss "), "{mode}: {}", compiled.log);
    };
    miss(&x, Mode::Default);
    miss(&x, Mode::ReduceOverhead);
    miss(&Tensor::randn(&[8, 13], 11), Mode::Default);
    let off = Config { fx_graph_cache: false, ..Config::default() };
    let compiled = compile_and_call(f, std::slice::from_ref(&x), Mode::Default, off, false);
    assert_eq!(fusion_lines(&compiled.log), compiled.log.trim_end(), "the cache is off: no lookup");
}

/// The GPU, held by one test at a time: max-autotune records a CUDA graph on the device's one
/// stream, which another test's launches would break.
fn gpu_alone() -> Option<(Device, MutexGuard<'static, ()>)> {
    static GPU: Mutex<()> = Mutex::new(());
    let device = gpu()?;
    Some((device, GPU.lock().unwrap_or_else(|e| e.into_inner())))
}

/// Both benchmarked transformer blocks on the GPU in `mode`: the second compile a hit with the
/// same output code and bits.
fn gpu_blocks_hit(mode: Mode) {
    fresh_cache();
    let Some((device, _alone)) = gpu_alone() else { return };
    for shape in [BlockShape::SMALL, BlockShape::LARGE] {
        let block = Block::new(shape, 0, device).unwrap();
        let x = Tensor::randn(&[shape.batch, shape.seq, shape.d_model], 1).to(device).unwrap();
        second_compile_hits(|xs: &[Tensor]| block.naive_forward(&xs[0]), &[x], mode);
    }
}

#[test]
fn gpu_the_blocks_compiled_again_hit_in_the_default_mode() {
    gpu_blocks_hit(Mode::Default);
}

#[test]
fn gpu_the_blocks_compiled_again_hit_under_max_autotune() {
    gpu_blocks_hit(Mode::MaxAutotune);
}
