//! Phase 4 (codegen inspection): everything the grader knows about the phase, in one place.
//!
//! The checks themselves are in `src/checks/`, compiled into two runner binaries,
//! `phase4-exercises` and `phase4-solutions`, that differ only in the crate they test (`subject`).
//! See the grader's crate documentation for how to add a phase.

use grader_harness::{CheckSpec, Exercise, Forbidden, Phase};

/// Checks that compile many programs with the system C compiler get more time than the default.
const COMPILES: u64 = 180;

/// Phase 4: reading the code Inductor generates, deciding fusions, printing kernels.
pub const PHASE: Phase = Phase {
    name: "phase4",
    title: "Codegen inspection",
    exercises_dir: "exercises/phase4-codegen",
    solutions_dir: "solutions/phase4-codegen",
    runner_package: "checks-phase4",
    book_page: "book/src/phase4/exercises.md",
    exercises: &[
        Exercise {
            name: "inspect",
            file: "src/inspect.rs",
            section: "inspect",
            stretch: false,
            hints: &[
                "`parse_kernel_name` first: `name.split_once(\"_fused_\")` gives the prefix and the rest; \
                 `rest.rsplit_once('_')` splits off the position, which must be all digits.",
                "In `inspect`, keep a clone of the backend to read it afterwards: `let inductor = \
                 Inductor::default(); dynamo::compile(model).backend(inductor.clone()).call(inputs)?;` then \
                 `inductor.output_codes()` holds one `OutputCode` per compiled graph.",
                "Each `KernelCode` has `name`, `origins` (the graph nodes: `o.node`) and `args` (`a.elements` \
                 floats each). Bytes are `4 * Σ elements`: every argument read or written once.",
            ],
            checks: &[CheckSpec::new("names_are_read"), CheckSpec::new("kernels_are_summarised")],
            forbidden: &[],
        },
        Exercise {
            name: "can_fuse",
            file: "src/fusion.rs",
            section: "can_fuse",
            stretch: false,
            hints: &[
                "Match on the pair `(&c.group, &c.own)`. The extern cases come first: a candidate whose \
                 `group` or whose `own` kind is `LoopKind::Extern` is always a refusal.",
                "Shapes decide the kind: same shape as a pointwise group is `Pointwise`; a reduction of the \
                 group's shape is `ReductionPrologue`; in a reduction group, the full shape is `RowEpilogue`, \
                 a shape `is_row_shape` accepts is `PerRow`, the same reduction shape and dim is \
                 `AnotherReduction`.",
                "Before saying `Fuse`, look at `c.reads`: one read with `Access::Other` means the value must be \
                 in memory, so refuse and name `read.buffer` in the reason.",
            ],
            checks: &[
                CheckSpec::new("decides_known_cases"),
                CheckSpec::new("refusals_give_reasons"),
                CheckSpec::new("fuses_as_much_as_inductor").with_timeout(COMPILES),
            ],
            forbidden: &[Forbidden {
                path: "scheduler::can_fuse",
                everywhere: true,
                why: "this exercise asks you to write the fusion decision yourself",
            }],
        },
        Exercise {
            name: "pointwise_c",
            file: "src/pointwise.rs",
            section: "pointwise_c",
            stretch: false,
            hints: &[
                "The header is `void NAME(float* const* args, int64_t xnumel) {`, then one line per argument: \
                 `const float* in_ptr0 = args[0];` (no `const` for outputs).",
                "The loop is `for (int64_t x = 0; x < xnumel; x++) { ... }`. Inside, match each `Stmt`: a \
                 `Load` is `float tmpN = in_ptr0[index];` with `index.to_c()`; a `Store` is \
                 `out_ptr0[index] = value;`.",
                "A `Compute` is `float tmpN = EXPR;` where `EXPR = op_expr(op, &args, Dialect::C)` and each \
                 operand prints as `tmpN` or `constant(c, Dialect::C)`.",
            ],
            checks: &[CheckSpec::new("pointwise_c_matches_eager").with_timeout(COMPILES)],
            forbidden: &[
                Forbidden {
                    path: "c::kernel",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "c::module",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "scalar_spelling",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "Spelling",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
            ],
        },
        Exercise {
            name: "pointwise_cuda",
            file: "src/pointwise.rs",
            section: "pointwise_cuda",
            stretch: false,
            hints: &[
                "The statements print exactly as in C (with `Dialect::Cuda`); what changes is the signature \
                 and the loop.",
                "Signature: `extern \"C\" __global__ void NAME(const float* in_ptr0, ..., float* out_ptr0, \
                 long long xnumel)`, one parameter per `kernel.args` entry, in order.",
                "The loop: `for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < xnumel; \
                 x += (long long)blockDim.x * gridDim.x)`. Consecutive threads take consecutive `x`, so a \
                 warp's loads are coalesced.",
            ],
            checks: &[
                CheckSpec::new("pointwise_cuda_matches_eager").with_timeout(COMPILES).on_gpu(),
                CheckSpec::new("pointwise_cuda_bandwidth").with_timeout(COMPILES).timed_on_gpu(),
            ],
            forbidden: &[
                Forbidden {
                    path: "cuda::kernel",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
                Forbidden {
                    path: "cuda::module",
                    everywhere: true,
                    why: "this exercise asks you to print the kernel yourself; `op_expr` and `constant` are yours to use",
                },
            ],
        },
        Exercise {
            name: "reduction_c",
            file: "src/reduction.rs",
            section: "reduction_c",
            stretch: true,
            hints: &[
                "Same signature and argument lines as `pointwise_c`; the outer loop is over rows, \
                 `for (int64_t x = 0; x < xnumel; x++)`.",
                "Inside, walk `phases`: a `Phase::Row` prints its statements once; a `Phase::Loop` declares \
                 `float tmpN = identity(r.combine, Dialect::C);` for each reduction before \
                 `for (int64_t r = 0; r < row_len; r++) {`.",
                "At the end of the loop body fold each value in: `tmpN = tmpN + tmpV;` for a sum, \
                 `tmpN = maximum(tmpN, tmpV);` for a max. Statements after the loop read `tmpN` as the row's \
                 result.",
            ],
            checks: &[CheckSpec::new("reduction_c_matches_eager").with_timeout(COMPILES)],
            forbidden: &[],
        },
    ],
};
