//! Phase 5 (benchmarking): everything the grader knows about the phase, declared once (see
//! `grader_harness::declare`): its exercises, their hints and book sections, the checks grading
//! each one, named by their functions in `src/checks/`, and the mistakes those checks must catch.

use grader_harness::{Exercise, Forbidden, Mutant, Phase};

/// Phase 5: timing code honestly, eager against compiled, the cost of compiling.
pub const PHASE: Phase = Phase {
    name: "phase5",
    title: "Benchmarking",
    exercises_dir: "exercises/phase5-benchmarking",
    solutions_dir: "solutions/phase5-benchmarking",
    runner_package: env!("CARGO_PKG_NAME"),
    book_page: "book/src/phase5/exercises.md",
    exercises: EXERCISES,
    mutants: MUTANTS,
};

/// Timed checks run the MLP or compile cold, in the grader's debug build: more than the default
/// time.
const TIMED: u64 = 300;

/// What the engine already has that times code: refused in every file of the crate, since the
/// sweep and the break-even are to be timed with the learner's own timer.
const TIMERS: &[Forbidden] = &[
    Forbidden { path: "Bench", everywhere: true, why: "this phase asks you to time code with your own `do_bench`" },
    Forbidden {
        path: "Timing",
        everywhere: true,
        why: "this phase asks you to take medians and quantiles yourself, with your own `quantile`",
    },
    Forbidden {
        path: "time_once",
        everywhere: true,
        why: "this phase asks you to time a first call yourself, with `Instant` and `device.synchronize()`",
    },
    Forbidden { path: "baseline", everywhere: true, why: "this phase asks you to time code with your own `do_bench`" },
];

/// The exercises, core ones first. The speed challenge (`src/challenge.rs`, its checks in
/// `checks/challenge.rs`) is the last core exercise; the stretch exercise, `profile`, follows it.
const EXERCISES: &[Exercise] = &[
    Exercise {
        name: "timer",
        file: "src/timer.rs",
        section: "timer",
        stretch: false,
        hints: &[
            "`quantile` first: copy and sort (`sort_by(f64::total_cmp)`), then `position = q.clamp(0.0, 1.0) * (len - 1) \
             as f64`; the samples at `position.floor()` and `position.ceil()` are the two to interpolate between.",
            "`is_stable`: check `max_samples` first, then fewer than `2 * round` samples, then compare \
             `quantile(samples, 0.5)` with `quantile(&samples[..n - round], 0.5)`.",
            "`do_bench`: the warm-up loop, `device.synchronize()?`, a `CacheFlush::new(device)`, then `while \
             !is_stable(&samples, config)`: make `count` pairs of `Stamp::new(device)?`, and for each pair `flush.run()?; \
             start.record()?; f()?; end.record()?;`, then push every `end.seconds_since(&start)?`.",
        ],
        checks: crate::checks![
            timer::quantile_matches_the_engine.without_gpu(),
            timer::stopping_rule_is_followed.without_gpu(),
            timer::times_known_work.timed(),
        ],
        forbidden: TIMERS,
    },
    Exercise {
        name: "sweep",
        file: "src/sweep.rs",
        section: "sweep",
        stretch: false,
        hints: &[
            "`crossover`: walk the points from the largest batch down while the speedup is at least `min_speedup`; \
             the last batch you reach is the answer (`rposition` of the last losing point does it in one line).",
            "`sweep_mlp`: one `Mlp::new(SEED, device)?` before the loop; per batch, the input, `do_bench` of \
             `|| mlp.forward(&x).map(drop)`, then `let compiled = dynamo::compile(|x: Tensor| mlp.forward(&x));` and \
             `do_bench` of `|| compiled.call(&x).map(drop)`. `config.warmup` covers the compiling call.",
            "`plot_svg`: `SVGBackend::new(path, (720, 480)).into_drawing_area()`, a `ChartBuilder` with \
             `.caption(title, ..)` and `build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())`, \
             `configure_mesh().x_desc(\"batch\").y_desc(\"ms per call\")`, one `LineSeries` per time with \
             `.label(..)` and `.legend(..)`, then `configure_series_labels().draw()` and `root.present()`. Turn \
             plotters' errors into `Error::Io` with `map_err`.",
        ],
        checks: crate::checks![
            sweep::crossover_is_found.without_gpu(),
            sweep::plot_shows_both_series.without_gpu(),
            sweep::sweep_times_the_mlp.with_timeout(TIMED).timed(),
        ],
        forbidden: TIMERS,
    },
    Exercise {
        name: "break_even",
        file: "src/break_even.rs",
        section: "break_even",
        stretch: false,
        hints: &[
            "`break_even`: `n` calls cost `first_call + (n - 1) * compiled` compiled and `n * eager` eagerly. Solve \
             `first_call + (n - 1) c <= n e` for `n`: `n >= (first_call - c) / (e - c)` when `e > c`.",
            "Mind the two easy cases before dividing: a first call no slower than an eager call repays at once \
             (`Some(1)`); a compiled call no faster than eager never repays (`None`). Round up with `ceil()`.",
            "`measure_costs`: `device.synchronize()?; let start = Instant::now(); compiled.call(&x)?; \
             device.synchronize()?;` then `start.elapsed().as_secs_f64()`. Only then `do_bench` the compiled and \
             the eager function.",
        ],
        checks: crate::checks![
            break_even::break_even_is_counted.without_gpu(),
            break_even::costs_are_measured.with_timeout(TIMED).timed(),
        ],
        forbidden: TIMERS,
    },
    Exercise {
        name: "modes",
        file: "src/modes.rs",
        section: "modes",
        stretch: false,
        hints: &[
            "`fastest`: `rows.iter().reduce(..)` keeping the row with the smaller `costs.compiled`, keeping the \
             earlier one on a tie (replace only when strictly smaller), then `.map(|r| r.mode)`.",
            "`measure_modes`: like `measure_costs`, once per mode: `for mode in Mode::ALL`, \
             `dynamo::compile(|x: Tensor| mlp.forward(&x)).mode(mode)`, the first call timed with `Instant` \
             between two `device.synchronize()?`, then `do_bench` of the steady state.",
            "Time eager once, before the loop, and put the same median in every row's `Costs`. Each row's \
             break-even is then your own `break_even(&row.costs)`.",
        ],
        checks: crate::checks![modes::fastest_is_picked.without_gpu(), modes::modes_are_measured.with_timeout(TIMED).timed()],
        forbidden: TIMERS,
    },
    Exercise {
        name: "train_break_even",
        file: "src/train.rs",
        section: "train_break_even",
        stretch: false,
        hints: &[
            "Two copies of the model, each with its own `Sgd`: one trains eagerly, one through the compiled step. \
             Write the step once as a closure taking the model and the optimizer, and call it from both.",
            "`dynamo::compile(|(x, target): (Tensor, Tensor)| step(&model, &sgd, &x, &target)).compiled_autograd(true)` \
             makes the whole step one graph; call it with `(&x, &target)`.",
            "As in `measure_costs`: `device.synchronize()?`, `Instant::now()`, the first compiled call, \
             `device.synchronize()?`; only then `do_bench` the compiled and the eager step.",
        ],
        checks: crate::checks![train::training_costs_are_measured.with_timeout(TIMED).timed()],
        forbidden: TIMERS,
    },
    Exercise {
        name: "fp8_scales",
        file: "src/fp8.rs",
        section: "fp8_scales",
        stretch: false,
        hints: &[
            "A row's scale decides where its largest magnitude lands: divided by the scale, it should land at the \
             format's largest value, `dtype.max_value()`, or in the binade just below. One row's scale is its largest \
             magnitude over that value; a row of zeros can take any positive scale.",
            "`x.abs()?.amax(1, false)?.to_vec()?` gives each row's largest magnitude. Divide `x` by a `[rows, 1]` \
             tensor of the scales (it broadcasts over the columns), then `to_dtype(dtype)`.",
            "In `fp8_linear`, element (i, j) is the sum over k of `a[i, k] * sa[i] * b[j, k] * sb[j]`: `sa[i] * sb[j]` \
             comes out of the sum. Widen both data tensors to `f32`, `matmul` with `b`'s transposed, then multiply \
             by a `[m, 1]` tensor of `a`'s scales and a `[1, n]` tensor of `b`'s.",
        ],
        checks: crate::checks![
            fp8::rows_fill_the_format.without_gpu(),
            fp8::product_applies_the_scales.without_gpu(),
            fp8::error_stays_within_the_format.without_gpu(),
        ],
        forbidden: &[Forbidden {
            path: ".scaled_mm",
            everywhere: true,
            why: "this exercise asks you to write the scaled product yourself, as `scaled_mm` computes it on a GPU",
        }],
    },
    COMPARE,
    CHALLENGE,
    Exercise {
        name: "profile",
        file: "src/profile.rs",
        section: "profile",
        stretch: true,
        hints: &[
            "Compile with `let compiled = dynamo::compile(|x: Tensor| forward(&x));`, call it once, \
             `x.device().synchronize()?`, then `let ((), profile) = profiler::profile(|| { ... })?;` around a loop of \
             `calls` calls that ends with `device.synchronize()`, so the last kernels finish inside the profile.",
            "`profile.key_averages()` groups the launches by name; its `rows()` have `self_host_total` and \
             `self_device_total`. Use device time when any row has some (a GPU), else host time, and `sort_by` the \
             matching `SortBy` column.",
            "Leave out the rows of kind `EventKind::Range`, sum the chosen time over the other rows for the total, \
             then `take(TOP)` and divide each row's time by that total for its share.",
        ],
        checks: crate::checks![profile::top_kernels_are_named.with_timeout(COMPILES).timed()],
        forbidden: &[],
    },
];

/// The phase's deep exercise: a comparison of two functions that decides, within a time budget,
/// whether one is faster, judged on pairs of secret cost (`checks/compare.rs`).
const COMPARE: Exercise = Exercise {
    name: "compare",
    file: "src/compare.rs",
    section: "compare",
    stretch: false,
    hints: &[
        "Start from what you know and watch it fail: in the scratch example, compare a noisy function with \
         itself a few times with two `do_bench` runs and their medians. Which samples pull the answer away, and \
         do they hit both functions alike?",
        "Whatever the machine does during the run should hit both functions alike: take their samples close \
         together in time, in turns, and compare them pair by pair. Summarise with a statistic that one slow call \
         in twenty cannot move, and leave the first calls out of it.",
        "An estimate from n samples wanders by about their spread over the square root of n. Decide when an \
         interval around your estimate lies wholly on one side of half the resolution (a difference) or wholly \
         within it (the same); until then take another round, if the time left allows one. For a median, the \
         interval can be read off the sorted samples: how many fall below the true median is a coin-flip count.",
    ],
    checks: crate::checks![compare::verdicts_match_secret_costs.timed()],
    forbidden: TIMERS,
};

/// The speed challenge: correctness on any machine; speed, timed by the judge, on a GPU.
const CHALLENGE: Exercise = Exercise {
    name: "challenge",
    file: "src/challenge.rs",
    section: "challenge",
    stretch: false,
    hints: &[
        "Start by copying `Block::challenge_forward` and its helpers into `forward`, keeping `block` as the only \
         field: check that it passes `challenge_matches_block` once the graph break is gone (the finite-scores \
         check reads a value back to the host; drop it).",
        "Three projections of the same input are one GEMM with the weights stacked: build `wqkv` \
         (`[3 * d_model, d_model]`) and `bqkv` once in `new` (`Tensor::cat(&[&wq, &wk, &wv], 0)` stacks them), \
         then `linear` once and split the result with `reshape`, `permute` and \
         `slice`, all views. `x.layer_norm` and `softmax(-1)` are one op each.",
        "Fold `1/sqrt(head_dim)` into the query rows of `wqkv` and `bqkv` in `new`, so no pass over the scores \
         scales them. Keep q, k and v as `[1, batch, heads, seq, head_dim]` slices: the matrix products read them \
         in place, where a reshape to drop the leading 1 would copy.",
    ],
    checks: crate::checks![
        challenge::challenge_matches_block.with_timeout(COMPILES).without_gpu(),
        challenge::challenge_is_faster.with_timeout(COMPILES).timed_on_gpu(),
    ],
    forbidden: &[],
};

/// Checks that compile a block with the system C compiler or NVRTC get more time than the default.
const COMPILES: u64 = 180;

/// Deliberately wrong variants of the solutions, and the checks that catch each one.
const MUTANTS: &[Mutant] = &[
    Mutant::new(
        "quantile takes the lower of the two samples around the position",
        "src/timer.rs",
        "sorted[low] + (sorted[high] - sorted[low]) * fraction",
        "sorted[low]",
    )
    .fails(crate::check_ids![timer::quantile_matches_the_engine, timer::stopping_rule_is_followed])
    .may_fail(crate::check_ids![timer::times_known_work, sweep::sweep_times_the_mlp, break_even::costs_are_measured, modes::modes_are_measured, compare::verdicts_match_secret_costs]),
    Mutant::new(
        "quantile forgets to sort",
        "src/timer.rs",
        "    sorted.sort_by(f64::total_cmp);\n",
        "",
    )
    .fails(crate::check_ids![timer::quantile_matches_the_engine, timer::stopping_rule_is_followed])
    .may_fail(crate::check_ids![timer::times_known_work, sweep::sweep_times_the_mlp, break_even::costs_are_measured, modes::modes_are_measured, compare::verdicts_match_secret_costs]),
    Mutant::new(
        "is_stable compares with the first round instead of all but the last",
        "src/timer.rs",
        "&samples[..n - config.round]",
        "&samples[..config.round]",
    )
    .fails(crate::check_ids![timer::stopping_rule_is_followed])
    .may_fail(crate::check_ids![timer::times_known_work, sweep::sweep_times_the_mlp, break_even::costs_are_measured, modes::modes_are_measured]),
    Mutant::new(
        "is_stable judges after a single round",
        "src/timer.rs",
        "    if n < 2 * config.round {\n",
        "    if n < config.round {\n",
    )
    .fails(crate::check_ids![timer::stopping_rule_is_followed])
    .may_fail(crate::check_ids![timer::times_known_work, sweep::sweep_times_the_mlp, break_even::costs_are_measured, modes::modes_are_measured]),
    Mutant::new(
        "do_bench makes no warm-up calls",
        "src/timer.rs",
        "    for _ in 0..config.warmup {\n        f()?;\n    }\n",
        "",
    )
    .fails(crate::check_ids![timer::times_known_work])
    .may_fail(crate::check_ids![sweep::sweep_times_the_mlp, break_even::costs_are_measured, modes::modes_are_measured]),
    Mutant::new(
        "do_bench stops the clock before calling f",
        "src/timer.rs",
        "            start.record()?;\n            f()?;\n            end.record()?;\n",
        "            start.record()?;\n            end.record()?;\n            f()?;\n",
    )
    .fails(crate::check_ids![
        timer::times_known_work,
        sweep::sweep_times_the_mlp,
        break_even::costs_are_measured,
        modes::modes_are_measured,
        train::training_costs_are_measured
    ]),
    Mutant::new(
        "do_bench delegates to the engine's Bench",
        "src/timer.rs",
        "pub fn do_bench(device: Device, config: &TimerConfig, mut f: impl FnMut() -> Result<()>) -> Result<Measurement> {\n",
        "pub fn do_bench(device: Device, config: &TimerConfig, mut f: impl FnMut() -> Result<()>) -> Result<Measurement> {\n    return Ok(Measurement { samples: engine::bench::Bench::new(device).run(f)?.samples().to_vec() });\n",
    )
    .refused(),
    Mutant::new(
        "crossover takes the first batch where compiled wins",
        "src/sweep.rs",
        "    let losing = points.iter().rposition(|p| p.speedup() < min_speedup);\n    let first_winning = losing.map_or(0, |i| i + 1);\n    points.get(first_winning).map(|p| p.batch)\n",
        "    points.iter().find(|p| p.speedup() >= min_speedup).map(|p| p.batch)\n",
    )
    .fails(crate::check_ids![sweep::crossover_is_found]),
    Mutant::new(
        "plot_svg draws the eager times twice",
        "src/sweep.rs",
        r#"("compiled", BLUE, points.iter().map(|p| p.compiled).collect())"#,
        r#"("compiled", BLUE, points.iter().map(|p| p.eager).collect())"#,
    )
    .fails(crate::check_ids![sweep::plot_shows_both_series]),
    Mutant::new(
        "plot_svg puts the batch on a linear axis",
        "src/sweep.rs",
        "(first / 1.5..last * 1.5).log_scale()",
        "first / 1.5..last * 1.5",
    )
    .fails(crate::check_ids![sweep::plot_shows_both_series]),
    Mutant::new(
        "plot_svg forgets the axis labels",
        "src/sweep.rs",
        r#".x_desc("batch").y_desc("ms per call")"#,
        "",
    )
    .fails(crate::check_ids![sweep::plot_shows_both_series]),
    Mutant::new(
        "sweep_mlp reports milliseconds",
        "src/sweep.rs",
        "points.push(Point { batch, eager: eager.median(), compiled: compiled.median() });",
        "points.push(Point { batch, eager: eager.median() * 1e3, compiled: compiled.median() * 1e3 });",
    )
    .fails(crate::check_ids![sweep::sweep_times_the_mlp]),
    Mutant::new(
        "sweep_mlp skips the first batch",
        "src/sweep.rs",
        "    for &batch in batches {\n",
        "    for &batch in &batches[1..] {\n",
    )
    .fails(crate::check_ids![sweep::sweep_times_the_mlp]),
    Mutant::new(
        "sweep_mlp reuses one compiled function across batch sizes",
        "src/sweep.rs",
        "    for &batch in batches {\n        let x = Tensor::randn(&[batch, MLP_FEATURES], batch as u64).to(device)?;\n        let eager = do_bench(device, config, || mlp.forward(&x).map(drop))?;\n        let compiled_mlp = dynamo::compile(|x: Tensor| mlp.forward(&x));\n",
        "    let compiled_mlp = dynamo::compile(|x: Tensor| mlp.forward(&x));\n    for &batch in batches {\n        let x = Tensor::randn(&[batch, MLP_FEATURES], batch as u64).to(device)?;\n        let eager = do_bench(device, config, || mlp.forward(&x).map(drop))?;\n",
    )
    .fails(crate::check_ids![sweep::sweep_times_the_mlp]),
    Mutant::new(
        "break_even rounds down",
        "src/break_even.rs",
        ".ceil().max(1.0)",
        ".floor().max(1.0)",
    )
    .fails(crate::check_ids![break_even::break_even_is_counted])
    .may_fail(crate::check_ids![break_even::costs_are_measured, modes::modes_are_measured]),
    Mutant::new(
        "break_even forgets that the first call also runs once",
        "src/break_even.rs",
        "((first_call - compiled) / (eager - compiled))",
        "(first_call / (eager - compiled))",
    )
    .fails(crate::check_ids![break_even::break_even_is_counted])
    .may_fail(crate::check_ids![break_even::costs_are_measured, modes::modes_are_measured]),
    Mutant::new(
        "measure_costs times the first call after a warm-up call",
        "src/break_even.rs",
        "    device.synchronize()?;\n    let start = Instant::now();\n",
        "    compiled.call(&x)?;\n    device.synchronize()?;\n    let start = Instant::now();\n",
    )
    .fails(crate::check_ids![break_even::costs_are_measured]),
    Mutant::new(
        "measure_costs times the first call with the engine's time_once",
        "src/break_even.rs",
        "    device.synchronize()?;\n    let start = Instant::now();\n    compiled.call(&x)?;\n    device.synchronize()?;\n    let first_call = start.elapsed().as_secs_f64();\n",
        "    let first_call = engine::bench::time_once(device, || compiled.call(&x))?.1.as_secs_f64();\n",
    )
    .refused(),
    Mutant::new(
        "fastest keeps the later row on a tie",
        "src/modes.rs",
        "if row.costs.compiled < best.costs.compiled",
        "if row.costs.compiled <= best.costs.compiled",
    )
    .fails(crate::check_ids![modes::fastest_is_picked]),
    Mutant::new(
        "fastest picks the slowest mode",
        "src/modes.rs",
        "if row.costs.compiled < best.costs.compiled",
        "if row.costs.compiled > best.costs.compiled",
    )
    .fails(crate::check_ids![modes::fastest_is_picked]),
    Mutant::new(
        "measure_modes reports milliseconds",
        "src/modes.rs",
        "rows.push(ModeCosts { mode, costs: Costs { first_call, compiled: steady, eager } });",
        "rows.push(ModeCosts { mode, costs: Costs { first_call, compiled: steady * 1e3, eager } });",
    )
    .fails(crate::check_ids![modes::modes_are_measured]),
    Mutant::new(
        "measure_modes leaves out max-autotune",
        "src/modes.rs",
        "    for mode in Mode::ALL {\n",
        "    for mode in Mode::ALL.into_iter().take(2) {\n",
    )
    .fails(crate::check_ids![modes::modes_are_measured]),
    Mutant::new(
        "compare: the mean of the log-ratios instead of their median",
        "src/compare.rs",
        "    let median = quantile(logs, 0.5);\n",
        "    let median = logs.iter().sum::<f64>() / logs.len() as f64;\n",
    )
    .fails(crate::check_ids![compare::verdicts_match_secret_costs]),
    Mutant::new(
        "compare: times a alone for half the time left, then b alone",
        "src/compare.rs",
        "    let mut logs = Vec::new();\n    let mut last_round = Duration::ZERO;\n    while !decided(&logs) && Instant::now() + last_round.mul_f64(1.5) <= deadline {\n        let round_started = Instant::now();\n        for _ in 0..ROUND {\n            let (ta, tb) = if logs.len() % 2 == 0 {\n                let ta = time_call(device, &mut a)?;\n                (ta, time_call(device, &mut b)?)\n            } else {\n                let tb = time_call(device, &mut b)?;\n                (time_call(device, &mut a)?, tb)\n            };\n            logs.push((ta / tb).ln());\n        }\n        last_round = round_started.elapsed();\n    }\n",
        "    let middle = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;\n    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());\n    while Instant::now() < middle {\n        times_a.push(time_call(device, &mut a)?);\n    }\n    while Instant::now() + (middle - started) / 10 < deadline {\n        times_b.push(time_call(device, &mut b)?);\n    }\n    let logs: Vec<f64> = times_a.iter().zip(&times_b).map(|(ta, tb)| (ta / tb).ln()).collect();\n",
    )
    .fails(crate::check_ids![compare::verdicts_match_secret_costs]),
    Mutant::new(
        "compare: never stops early, whatever the evidence",
        "src/compare.rs",
        "while !decided(&logs) && ",
        "while ",
    )
    .fails(crate::check_ids![compare::verdicts_match_secret_costs]),
    Mutant::new(
        "compare: a fixed 200 pairs of samples, whatever the budget",
        "src/compare.rs",
        "while !decided(&logs) && Instant::now() + last_round.mul_f64(1.5) <= deadline {",
        "while logs.len() < 200 {",
    )
    .fails(crate::check_ids![compare::verdicts_match_secret_costs]),
    Mutant::new(
        "compare: reports b's time over a's",
        "src/compare.rs",
        "ratio: centre.exp()",
        "ratio: (-centre).exp()",
    )
    .fails(crate::check_ids![compare::verdicts_match_secret_costs]),
    Mutant::new(
        "compare: hands the pairs to the engine's Bench::run_interleaved",
        "src/compare.rs",
        "    let (centre, _) = median_and_interval(&logs);\n",
        "    let fs: &mut [&mut dyn FnMut() -> Result<()>] = &mut [&mut a, &mut b];\n    let timings = engine::bench::Bench::new(device).samples(20).run_interleaved(fs)?;\n    let logs = vec![(timings[0].median() / timings[1].median()).ln()];\n    let (centre, _) = median_and_interval(&logs);\n",
    )
    .refused(),
    Mutant::new(
        "challenge: the attention scale is forgotten",
        "src/challenge.rs",
        "let scale = 1.0 / (block.shape.head_dim() as f32).sqrt();",
        "let scale = 1.0;",
    )
    .fails(crate::check_ids![challenge::challenge_matches_block, challenge::challenge_is_faster]),
    Mutant::new(
        "challenge: attention runs across heads instead of tokens",
        "src/challenge.rs",
        "permute(&[2, 0, 3, 1, 4])",
        "permute(&[2, 0, 1, 3, 4])",
    )
    .fails(crate::check_ids![challenge::challenge_matches_block, challenge::challenge_is_faster]),
    Mutant::new(
        "challenge: a host read of the input breaks the graph",
        "src/challenge.rs",
        "    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {\n",
        "    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {\n        let _peak = x.sum_all()?.item()?;\n",
    )
    .fails(crate::check_ids![challenge::challenge_matches_block, challenge::challenge_is_faster]),
    Mutant::new(
        "profile: top_kernels keeps the cheapest kernels",
        "src/profile.rs",
        "let top = kernels.iter().take(TOP);",
        "let top = kernels.iter().rev().take(TOP);",
    )
    .fails(crate::check_ids![profile::top_kernels_are_named]),
    Mutant::new(
        "profile: top_kernels names them cheapest first",
        "src/profile.rs",
        "let top = kernels.iter().take(TOP);",
        "let top = kernels.iter().take(TOP).rev();",
    )
    .fails(crate::check_ids![profile::top_kernels_are_named]),
    Mutant::new(
        "profile: top_kernels answers every model with the kernels of the first it profiled",
        "src/profile.rs",
        "    Ok(top.map(|r| KernelShare { name: r.name.clone(), kind: r.kind, share: time(r) / total }).collect())\n",
        "    static FIRST: std::sync::OnceLock<Vec<KernelShare>> = std::sync::OnceLock::new();\n    Ok(FIRST.get_or_init(|| top.map(|r| KernelShare { name: r.name.clone(), kind: r.kind, share: time(r) / total }).collect()).clone())\n",
    )
    .fails(crate::check_ids![profile::top_kernels_are_named]),
    Mutant::new(
        "profile: top_kernels ranks by device time on the CPU",
        "src/profile.rs",
        "if on_device {",
        "if true {",
    )
    .fails(crate::check_ids![profile::top_kernels_are_named]),
    Mutant::new(
        "profile: top_kernels profiles the block run eagerly",
        "src/profile.rs",
        "            compiled.call(x)?;\n        }\n",
        "            forward(x)?;\n        }\n",
    )
    .fails(crate::check_ids![profile::top_kernels_are_named]),
    Mutant::new(
        "measure_training_costs warms the compiled step up before timing its first call",
        "src/train.rs",
        "    device.synchronize()?;\n    let start = Instant::now();",
        "    compiled.call((&x, &target))?;\n    device.synchronize()?;\n    let start = Instant::now();",
    )
    .fails(crate::check_ids![train::training_costs_are_measured]),
    Mutant::new(
        "fp8: quantize_rows takes one scale for the whole matrix",
        "src/fp8.rs",
        "let largest = x.abs()?.amax(1, false)?.to_vec()?;",
        "let largest = vec![x.abs()?.amax(1, false)?.amax(0, false)?.item()?; x.shape()[0]];",
    )
    .fails(crate::check_ids![fp8::rows_fill_the_format, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: quantize_rows scales by the largest value instead of the largest magnitude",
        "src/fp8.rs",
        "let largest = x.abs()?.amax(1, false)?.to_vec()?;",
        "let largest = x.amax(1, false)?.to_vec()?;",
    )
    .fails(crate::check_ids![fp8::rows_fill_the_format, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: quantize_rows gives a row of zeros the scale 0",
        "src/fp8.rs",
        "if a > 0.0 { a / max } else { 1.0 }",
        "a / max",
    )
    .fails(crate::check_ids![fp8::rows_fill_the_format, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: quantize_rows uses f8e4m3's range for both formats",
        "src/fp8.rs",
        "let max = dtype.max_value();",
        "let max = DType::F8E4M3.max_value();",
    )
    .fails(crate::check_ids![fp8::rows_fill_the_format])
    .may_fail(crate::check_ids![fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: quantize_rows multiplies by the scales",
        "src/fp8.rs",
        "x.div(&column)",
        "x.mul(&column)",
    )
    .fails(crate::check_ids![fp8::rows_fill_the_format, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: fp8_linear forgets b's scales",
        "src/fp8.rs",
        "product.mul(&scale_a)?.mul(&scale_b)",
        "product.mul(&scale_a)",
    )
    .fails(crate::check_ids![fp8::product_applies_the_scales, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: fp8_linear applies a's scales to the columns",
        "src/fp8.rs",
        "Tensor::from_vec(a.scales.clone(), &[a.scales.len(), 1])",
        "Tensor::from_vec(a.scales.clone(), &[1, a.scales.len()])",
    )
    .fails(crate::check_ids![fp8::product_applies_the_scales, fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: fp8_linear multiplies in bf16",
        "src/fp8.rs",
        "a.data.to_dtype(DType::F32)?.matmul(&b.data.to_dtype(DType::F32)?.t()?)?",
        "a.data.to_dtype(DType::BF16)?.matmul(&b.data.to_dtype(DType::BF16)?.t()?)?",
    )
    .fails(crate::check_ids![fp8::product_applies_the_scales])
    .may_fail(crate::check_ids![fp8::error_stays_within_the_format]),
    Mutant::new(
        "fp8: fp8_linear hands the product to the engine's scaled_mm",
        "src/fp8.rs",
        "    let product = a.data.to_dtype(DType::F32)?",
        "    let one = Tensor::from_vec(vec![1.0], &[1])?;\n    let _ = a.data.scaled_mm(&b.data.t()?, &one, &one, DType::F32)?;\n    let product = a.data.to_dtype(DType::F32)?",
    )
    .refused(),
];
