//! The code the book shows, as compiled functions. Each function is one *section*: a block of
//! code the book includes between `ANCHOR` markers, and the output it prints, which the book
//! includes from the insta snapshot that `tests/output.rs` keeps of it.
//!
//! Run any section yourself with `cargo run -p book-examples -- <section>`; run it without an
//! argument to list them.
//!
//! To add an example to a chapter: write a function here between `// ANCHOR: name` and
//! `// ANCHOR_END: name` comments, list it in [`SECTIONS`], run
//! `INSTA_UPDATE=always cargo test -p book-examples` and read the new snapshot in
//! `tests/snapshots/`, then include both in the page: the code in a `` ```rust `` block with
//! `{{#include ../examples/src/FILE.rs:name}}`, the output in a `` ```text `` block with
//! `{{#include ../examples/tests/snapshots/SECTION.snap:4:}}` (line 4 is where insta's header
//! ends). `tests/book_links.rs` checks that every include and link in the book resolves and that
//! `` ```rust `` blocks hold includes only.

pub mod mlp;
pub mod modes;
pub mod phase1;
pub mod phase2;
pub mod phase3;
pub mod phase4;
pub mod phase5;
pub mod tour;
pub mod training;

/// One runnable example: the name it is run and snapshotted by, and the code.
pub struct Section {
    /// The command-line name, also the snapshot's name (`tour_eager`).
    pub name: &'static str,
    /// Prints the section's output to stdout.
    pub run: fn() -> engine::Result<()>,
}

/// Every section, in the order the book shows them.
pub const SECTIONS: &[Section] = &[
    Section { name: "tour_eager", run: tour::eager },
    Section { name: "tour_views", run: tour::views },
    Section { name: "tour_trace", run: tour::trace },
    Section { name: "tour_graph", run: tour::graph },
    Section { name: "tour_decompose", run: tour::decompose },
    Section { name: "tour_item", run: tour::item_inside_compile },
    Section { name: "phase1_backends", run: phase1::backends },
    Section { name: "phase1_print_backend", run: phase1::print_backend },
    Section { name: "phase1_steady_state", run: phase1::steady_state },
    Section { name: "phase2_explain", run: phase2::explain },
    Section { name: "phase2_tabular", run: phase2::tabular },
    Section { name: "phase2_recompiles", run: phase2::recompiles },
    Section { name: "phase2_guards", run: phase2::guards },
    Section { name: "phase3_explain", run: phase3::explain },
    Section { name: "phase3_fullgraph", run: phase3::fullgraph },
    Section { name: "phase3_break_log", run: phase3::break_log },
    Section { name: "phase3_fixed", run: phase3::fixed },
    Section { name: "phase3_custom_op", run: phase3::custom_op },
    Section { name: "phase3_constant_recompiles", run: phase3::constant_recompiles },
    Section { name: "phase3_regional", run: phase3::regional },
    Section { name: "phase3_compile_trace", run: phase3::compile_trace },
    Section { name: "phase4_output_code", run: phase4::output_code },
    Section { name: "phase4_output_code_cuda", run: phase4::output_code_cuda },
    Section { name: "phase4_kernel_ir", run: phase4::kernel_ir },
    Section { name: "phase4_fusion", run: phase4::fusion },
    Section { name: "phase4_concat_linear", run: phase4::concat_linear },
    Section { name: "phase4_output_code_bf16", run: phase4::output_code_bf16 },
    Section { name: "phase4_output_code_cuda_bf16", run: phase4::output_code_cuda_bf16 },
    Section { name: "phase5_stamps", run: phase5::stamps },
    Section { name: "phase5_interleaved", run: phase5::interleaved },
    Section { name: "phase5_profile", run: phase5::profile },
    Section { name: "phase5_modes", run: modes::modes },
    Section { name: "phase5_precision_error", run: phase5::precision_error },
    Section { name: "training_joint_graph", run: training::joint_graph },
    Section { name: "training_partition", run: training::partition },
    Section { name: "training_backward_code", run: training::backward_code },
    Section { name: "training_whole_step", run: training::whole_step },
];

/// The section called `name`.
pub fn section(name: &str) -> Option<&'static Section> {
    SECTIONS.iter().find(|s| s.name == name)
}
