//! Runs one of the book's examples by name: `cargo run -p book-examples -- tour_graph`.

use std::process::ExitCode;

use book_examples::{SECTIONS, section};

fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: cargo run -p book-examples -- <section>\nsections:");
        for s in SECTIONS {
            eprintln!("  {}", s.name);
        }
        return ExitCode::FAILURE;
    };
    let Some(section) = section(&name) else {
        eprintln!("no section named `{name}`; run without an argument to list them");
        return ExitCode::FAILURE;
    };
    match (section.run)() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
