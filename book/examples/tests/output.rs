//! Runs every section of the book's examples and compares what it prints with its snapshot. The
//! book includes those snapshots, so the output it shows is what the engine prints today: change
//! the engine's printing and this test fails until the snapshots (and the book) are refreshed
//! with `INSTA_UPDATE=always cargo test -p book-examples`.
//!
//! The sections run against an empty kernel and graph cache of their own: the book shows a first
//! run, and a cache filled by earlier runs on the same machine (the FX graph cache answers
//! max-autotune's compile, with a line of its own) must not change what they print.

use std::process::Command;

use book_examples::SECTIONS;

#[test]
fn every_section_prints_what_the_book_shows() {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("book-examples-cache");
    for section in SECTIONS {
        // Emptied before each section, so that no section sees another's compiled graphs.
        match std::fs::remove_dir_all(&cache) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{} cannot be emptied: {e}", cache.display()),
            _ => {}
        }
        let output = Command::new(env!("CARGO_BIN_EXE_book-examples"))
            .arg(section.name)
            .env_remove("ENGINE_LOGS")
            .env("ENGINE_CACHE_DIR", &cache)
            .output()
            .expect("the book-examples binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "section `{}` failed:\n{stderr}", section.name);
        let stdout = String::from_utf8(output.stdout).expect("sections print UTF-8");
        insta::with_settings!({ prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(section.name, stdout);
        });
    }
}
