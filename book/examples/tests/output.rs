//! Runs every section of the book's examples and compares what it prints with its snapshot. The
//! book includes those snapshots, so the output it shows is what the engine prints today: change
//! the engine's printing and this test fails until the snapshots (and the book) are refreshed
//! with `INSTA_UPDATE=always cargo test -p book-examples`.

use std::process::Command;

use book_examples::SECTIONS;

#[test]
fn every_section_prints_what_the_book_shows() {
    for section in SECTIONS {
        let output = Command::new(env!("CARGO_BIN_EXE_book-examples"))
            .arg(section.name)
            .env_remove("ENGINE_LOGS")
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
