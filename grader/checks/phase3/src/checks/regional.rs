//! Checks of `regional`. The learner's stack runs on blocks and inputs drawn from the seed; its
//! outputs are recorded for the judge, and its compiles are counted by the engine itself
//! (`dynamo::counters()`, the process's total over every compiled function), never taken from what
//! the learner's code reports. Compile work and steady-state time are measured by the check against
//! the whole stack compiled by the grader, in the same process.

use std::time::{Duration, Instant};

use engine::compile_time::Stage;
use engine::dynamo::{self, CompileStats};
use engine::{Device, Tensor};
use grader_harness::{CheckResult, Context, Failure, Tolerance, check_close, ensure, record, record_tensor};

use crate::subject::RegionalStack;
use crate::subject::regional::{BlockShape, LAYERS, Stack};

/// The blocks the checks run: small, so that twelve of them compile and run in seconds in the
/// grader's debug build.
const SHAPE: BlockShape = BlockShape { batch: 2, seq: 8, d_model: 32, heads: 4 };

/// The three sequence lengths of the seed, in the order the stack is called at them: distinct,
/// growing, from 6 to 22.
fn lengths(seed: u64) -> [usize; 3] {
    let first = 6 + (seed % 5) as usize;
    let second = first + 2 + (seed / 5 % 4) as usize;
    [first, second, second + 2 + (seed / 20 % 4) as usize]
}

/// Twelve blocks add a few hundred terms per output; the compiled kernels round differently.
const TOLERANCE: Tolerance = Tolerance { abs: 1e-4, rel: 1e-3 };

/// The stack of the seed, and its input at `seq`.
fn stack_and_input(seed: u64, seq: usize) -> Result<(Stack, Tensor), Failure> {
    let stack = Stack::new(SHAPE, LAYERS, seed, Device::Cpu)?;
    Ok((stack, Tensor::randn(&[SHAPE.batch, seq, SHAPE.d_model], seed.wrapping_mul(31).wrapping_add(seq as u64))))
}

/// What the engine counted between `before` and now: compiles, cache hits, and the work of
/// generating code (lowering, scheduling and code generation, which grow with the graph; the C
/// compiler's time also holds a fixed cost per library, whatever its size).
struct Counted {
    compiles: usize,
    cache_hits: usize,
    work: Duration,
}

fn since(before: &CompileStats) -> Counted {
    let now = dynamo::counters();
    Counted {
        compiles: now.compiles - before.compiles,
        cache_hits: now.cache_hits - before.cache_hits,
        work: [Stage::Lowering, Stage::Scheduling, Stage::Codegen]
            .iter()
            .map(|&s| now.stages.get(s).saturating_sub(before.stages.get(s)))
            .sum(),
    }
}

/// The stack's output at every length is the stack run eagerly's.
pub fn regional_matches_the_stack(ctx: &Context) -> CheckResult {
    let regional = RegionalStack::new(SHAPE);
    let lengths = lengths(ctx.seed);
    for seq in lengths {
        let (stack, x) = stack_and_input(ctx.seed, seq)?;
        let output = regional.forward(&stack, &x)?;
        record_tensor(format!("output at length {seq}"), &output, TOLERANCE);
        check_close(&format!("the output of {LAYERS} blocks at length {seq}"), &output, &stack.naive_forward(&x)?, TOLERANCE)?;
    }
    Ok(format!("{LAYERS} blocks at lengths {lengths:?} compute the stack"))
}

/// One compile for the twelve blocks' first call, the other eleven cache hits.
pub fn one_compile_serves_every_block(ctx: &Context) -> CheckResult {
    let (stack, x) = stack_and_input(ctx.seed, lengths(ctx.seed)[0])?;
    let before = dynamo::counters();
    let regional = RegionalStack::new(SHAPE);
    let output = regional.forward(&stack, &x)?;
    let counted = since(&before);
    record("compiles and cache hits of the first call", format!("{} {}", counted.compiles, counted.cache_hits));
    record_tensor("the first call's output", &output, TOLERANCE);
    ensure(counted.compiles == 1 && counted.cache_hits == LAYERS - 1, || {
        format!(
            "the first call of {LAYERS} blocks made {} compile(s) and {} cache hit(s); regional compilation makes 1 \
             and {}: one compiled function, called for every block, with the block's weights as its inputs",
            counted.compiles,
            counted.cache_hits,
            LAYERS - 1
        )
    })?;
    Ok(format!("1 compile and {} cache hits for {LAYERS} blocks", LAYERS - 1))
}

/// A second length compiles at most once more (a recompile that makes the length dynamic), a
/// third not at all.
pub fn new_lengths_recompile_only_the_region(ctx: &Context) -> CheckResult {
    let regional = RegionalStack::new(SHAPE);
    let lengths = lengths(ctx.seed);
    let mut per_length = Vec::new();
    for seq in lengths {
        let (stack, x) = stack_and_input(ctx.seed, seq)?;
        let before = dynamo::counters();
        let output = regional.forward(&stack, &x)?;
        per_length.push(since(&before).compiles);
        record_tensor(format!("output at length {seq}"), &output, TOLERANCE);
    }
    let fits = per_length[0] == 1 && per_length[1] <= 1 && per_length[2] == 0;
    record("one compile, then at most one for a new length, then none", fits);
    ensure(fits, || {
        format!(
            "compiles at lengths {lengths:?}: {per_length:?}; expected 1, at most 1, then 0: after one recompile for a \
             new length, the length is a symbol of the compiled graph (do not turn dynamic sizes off)"
        )
    })?;
    Ok(format!("compiles at lengths {lengths:?}: {per_length:?}"))
}

// ANCHOR: bars
/// The most of the whole stack's code-generation time the regional stack's may take.
const CODEGEN_SHARE: f64 = 0.5;
/// The most the regional stack's steady-state call may take, in whole-stack calls.
const STEADY_RATIO: f64 = 1.5;
// ANCHOR_END: bars

/// Against the whole stack compiled as one graph by the grader, both from an empty kernel cache:
/// the regional stack's code generation (the engine's stages) takes at most [`CODEGEN_SHARE`] of
/// the whole's (it is about a twelfth: the bar leaves room for a few milliseconds of preemption on
/// a loaded machine, which a 2 ms compile of one block cannot otherwise absorb), and its steady
/// state at most [`STEADY_RATIO`] of a whole-stack call.
pub fn regional_compiles_less_and_runs_as_fast(ctx: &Context) -> CheckResult {
    let _cache = empty_kernel_cache()?;
    let (stack, x) = stack_and_input(ctx.seed, lengths(ctx.seed)[0])?;
    let before = dynamo::counters();
    let whole = dynamo::compile(|x: Tensor| stack.naive_forward(&x)).name("the whole stack");
    whole.call(&x)?;
    let whole_work = since(&before).work;
    let before = dynamo::counters();
    let regional = RegionalStack::new(SHAPE);
    let output = regional.forward(&stack, &x)?;
    let regional_work = since(&before).work;
    record_tensor("the first call's output", &output, TOLERANCE);
    let (mut whole_times, mut regional_times) = (Vec::new(), Vec::new());
    // Only the steady state is timed on the device: on a shared GPU it alone waits for the lock.
    grader_harness::timing::timed(|| -> Result<(), Failure> {
        for _ in 0..7 {
            whole_times.push(timed(|| whole.call(&x).map(drop))?);
            regional_times.push(timed(|| regional.forward(&stack, &x).map(drop))?);
        }
        Ok(())
    })?;
    let (w, r) = (median(whole_times), median(regional_times));
    let less_work = regional_work.as_secs_f64() <= CODEGEN_SHARE * whole_work.as_secs_f64();
    let as_fast = r.as_secs_f64() <= STEADY_RATIO * w.as_secs_f64();
    record(format!("code generation within {CODEGEN_SHARE} of the whole stack's, steady state within {STEADY_RATIO}x"), format!("{less_work} {as_fast}"));
    let measured = format!(
        "code generation {:.0} ms against the whole stack's {:.0} ms; a call {:.2} ms against {:.2} ms",
        regional_work.as_secs_f64() * 1e3,
        whole_work.as_secs_f64() * 1e3,
        r.as_secs_f64() * 1e3,
        w.as_secs_f64() * 1e3
    );
    ensure(less_work, || format!("{measured}: compile one block, not {LAYERS}"))?;
    ensure(as_fast, || format!("{measured}: run the blocks through compiled code, not eagerly"))?;
    Ok(measured)
}

fn timed(f: impl FnOnce() -> engine::Result<()>) -> Result<Duration, Failure> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Points this process's kernel cache at a new, empty folder (removed when the guard drops), then
/// compiles an unrelated function, so that what every process pays once (finding the C compiler)
/// is paid before anything is measured.
fn empty_kernel_cache() -> Result<tempfile::TempDir, Failure> {
    let dir = tempfile::Builder::new()
        .prefix("phase3-regional-cache-")
        .tempdir()
        .map_err(|e| Failure::Setup(format!("cannot create a temporary directory: {e}")))?;
    // SAFETY: the check runs on the runner's only thread, before the engine has read its cache
    // directory or started a thread that reads the environment.
    unsafe { std::env::set_var("ENGINE_CACHE_DIR", dir.path()) };
    dynamo::compile(|t: Tensor| t.mul(3.0)?.exp()).name("the process warm-up").call(&Tensor::randn(&[4], 0))?;
    Ok(dir)
}
