//! Phase 5 (benchmarking): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase5-exercises` and `phase5-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Forbidden, Phase};

/// Phase 5: timing code honestly, eager against compiled, the cost of compiling.
pub const PHASE: Phase = Phase {
    name: "phase5",
    title: "Benchmarking",
    exercises_dir: "exercises/phase5-benchmarking",
    solutions_dir: "solutions/phase5-benchmarking",
    runner_package: "checks-phase5",
    book_page: "book/src/phase5/exercises.md",
    exercises: EXERCISES,
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
        checks: &[
            CheckSpec::new("quantile_matches_the_engine"),
            CheckSpec::new("stopping_rule_is_followed"),
            CheckSpec::new("times_known_work").timed(),
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
        checks: &[
            CheckSpec::new("crossover_is_found"),
            CheckSpec::new("plot_shows_both_series"),
            CheckSpec::new("sweep_times_the_mlp").with_timeout(TIMED).timed(),
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
        checks: &[
            CheckSpec::new("break_even_is_counted"),
            CheckSpec::new("costs_are_measured").with_timeout(TIMED).timed(),
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
        checks: &[
            CheckSpec::new("fastest_is_picked"),
            CheckSpec::new("modes_are_measured").with_timeout(TIMED).timed(),
        ],
        forbidden: TIMERS,
    },
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
        checks: &[CheckSpec::new("top_kernels_are_named").with_timeout(COMPILES).timed()],
        forbidden: &[],
    },
];

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
         (`[3 * d_model, d_model]`) and `bqkv` once in `new` (there is no `cat` op: stack the values of \
         `to_vec()` and `Tensor::from_vec`), then `linear` once and split the result with `reshape`, `permute` and \
         `slice`, all views. `x.layer_norm` and `softmax(-1)` are one op each.",
        "Fold `1/sqrt(head_dim)` into the query rows of `wqkv` and `bqkv` in `new`, so no pass over the scores \
         scales them. Keep q, k and v as `[1, batch, heads, seq, head_dim]` slices: the matrix products read them \
         in place, where a reshape to drop the leading 1 would copy.",
    ],
    checks: &[
        CheckSpec::new("challenge_matches_block").with_timeout(COMPILES),
        CheckSpec::new("challenge_is_faster").with_timeout(COMPILES).timed_on_gpu(),
    ],
    forbidden: &[],
};

/// Checks that compile a block with the system C compiler or NVRTC get more time than the default.
const COMPILES: u64 = 180;
