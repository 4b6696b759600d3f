//! The code the book shows, as compiled functions. Each function is one *section*: a block of
//! code the book includes between `ANCHOR` markers, and the output it prints, which the book
//! includes from the insta snapshot that `tests/output.rs` keeps of it.
//!
//! Run any section yourself with `cargo run -p book-examples -- <section>`; run it without an
//! argument to list them.

pub mod mlp;
pub mod phase1;
pub mod tour;

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
];

/// The section called `name`.
pub fn section(name: &str) -> Option<&'static Section> {
    SECTIONS.iter().find(|s| s.name == name)
}
