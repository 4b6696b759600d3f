//! `book-sources`, run by mdBook as a preprocessor (`book/book.toml`): `book-sources supports
//! RENDERER` answers whether it works with that renderer (all of them), and `book-sources` alone
//! reads mdBook's `[context, book]` JSON on stdin and writes the book back on stdout, with the
//! sources it links to as pages of its own (see the library).

use std::io;

use anyhow::Result;
use book_sources::{Layout, link_sources};
use clap::{Parser, Subcommand};

/// The workbook's sources the book links to, as pages of the book.
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Exits 0: the pages are Markdown, which every renderer reads.
    Supports {
        /// The renderer mdBook asks about.
        renderer: String,
    },
}

fn main() -> Result<()> {
    if let Some(Command::Supports { .. }) = Cli::parse().command {
        return Ok(());
    }
    let (context, mut book) = mdbook_preprocessor::parse_input(io::stdin())?;
    link_sources(&Layout::of_book(&context.root)?, &mut book)?;
    serde_json::to_writer(io::stdout(), &book)?;
    Ok(())
}
