//! The exercise crates' files as the workbook ships them (stubs and given code), known by their
//! SHA-256: `reset` restores exactly what was shipped (not a learner's commit that still holds a
//! `todo!()`, nor a copy the grader took after the learner had started), and the
//! [audit](crate::audit) need not read a file the learner has not changed.
//!
//! When a stub changes in the workbook, `cargo test -p grader -- --ignored shipped_stubs` (run
//! by CI) fails and prints the new table to paste here.

use sha2::{Digest, Sha256};

/// `(file relative to the workbook root, SHA-256 of its shipped bytes, in hex)` for every `.rs`
/// file of the exercise crates.
pub const SHIPPED: &[(&str, &str)] = &[
    ("exercises/phase1-backends/src/compare.rs", "b9551f20070bbc789cf8825410c15fe81c932a269cd2ad406c55792c22b802b8"),
    ("exercises/phase1-backends/src/deny_ops.rs", "885575dfeaf457e03b0ca25bb6aeff75cf03476ba8e2de9eceba02cf02d791f9"),
    (
        "exercises/phase1-backends/src/interpreter.rs",
        "aff17c13e9577f90b993ac8c8c7527045fd9c910e6b6bf4e8218a5ead5f34137",
    ),
    ("exercises/phase1-backends/src/latency.rs", "047734c9bb10a69232a698999d2a0df7446e31e2841ca246c98adb31df099e0c"),
    ("exercises/phase1-backends/src/lib.rs", "7b72f6435baa340cbe9225a3bd73b642f8971c49da45a491f63f81fca9567deb"),
    ("exercises/phase1-backends/src/model.rs", "80734a3c4d7794e2329f1840a6acc6525d3a9e14fd2afcba54b5ace2f0ba8edf"),
    ("exercises/phase1-backends/src/recording.rs", "95c76237dfdda4aecc8a89cc2d1468788b7612af31d5ecc345bcc06e11cad237"),
    ("exercises/phase2-capture/src/cse.rs", "1bf74f5ea058e551bd176e398819ee498330b441583c71509c2c3aa633e3b022"),
    ("exercises/phase2-capture/src/dead_code.rs", "86a54e32d023a366bc76238a6ec1b1e5635e4db676ec687bf9a8cf066f79e16d"),
    (
        "exercises/phase2-capture/src/explain_report.rs",
        "2839c215b141a7ed45b9a04ee0ea1ae0940160328c551b403bbdefab1cf95714",
    ),
    ("exercises/phase2-capture/src/lib.rs", "6d2e3fa4a1ef9951df23052543e0b1e4bb73c1737b36db342a14302c48a9ba82"),
    ("exercises/phase2-capture/src/line_table.rs", "d12627eb7a08f4c6bd86c03956a81a99b7ce466170d178b7ee3c11000aa6150e"),
    ("exercises/phase2-capture/src/model.rs", "85a2eabf602a96eb51340f141852d4938b50bb223369870791028ceea1b6eb97"),
    ("exercises/phase2-capture/src/shape_prop.rs", "08f531223028b46203de87305d0e76986a7ac03f37f5bb998734c0e12aa99f32"),
    ("exercises/phase3-graph-breaks/src/branch.rs", "650a5ba7b6bf53b9ae13fb65e9516b3b754514f706e8c2cc1a74f01bda0e7afc"),
    (
        "exercises/phase3-graph-breaks/src/break_cost.rs",
        "ef64b835cf8b76b6703c784dd2f71736a6d79465f52431c5f4f984fe5e8f284f",
    ),
    (
        "exercises/phase3-graph-breaks/src/custom_op.rs",
        "b9fd2a7d24043bc7c165241a839300b5c8cf7a435fcf8d64a241528f2d7a198d",
    ),
    ("exercises/phase3-graph-breaks/src/lib.rs", "e77e120bc404e87c55e0c364c384d66ef5828a402412cc3f85be13603093097c"),
    (
        "exercises/phase3-graph-breaks/src/logging.rs",
        "b7eb7c3fec3c4980cb35e9d90c34ae697bddaae8eda4f2d0b40253b69be990b5",
    ),
    ("exercises/phase3-graph-breaks/src/models.rs", "0635b2a8742ef84eccc59ffa71ff075fbb1c883c83641b0b4f35fc3cb4c3f079"),
    (
        "exercises/phase3-graph-breaks/src/round_trip.rs",
        "f6615c1a17915e71ad7114f544e016d26aa5cf598bb10216b624ef627f1e903e",
    ),
    ("exercises/phase4-codegen/src/fusion.rs", "8175e01a86f1a1e38024164444b8e61dcffcdf6356dec3c2845daf94573b71f2"),
    ("exercises/phase4-codegen/src/inspect.rs", "2dc11080ad6ef821f18dd557a92ee997fab568b4875826430a9d63edb453b4df"),
    ("exercises/phase4-codegen/src/lib.rs", "b88485b19d056f03180ea6f4bfc6e7297f23fb6d4ba986df0b7b5cde4a7030b1"),
    ("exercises/phase4-codegen/src/models.rs", "f652f63887da2b47f0e923c5a24971c14481aa972dd1f444b08cc5fa61dbfb88"),
    ("exercises/phase4-codegen/src/pointwise.rs", "93ed9963a3177f8740b84fac523cb2cd82d8f824e07cc47020f15d0feab21494"),
    ("exercises/phase4-codegen/src/reduction.rs", "abb7e9ce88f7178e025573153c050ffdac46b3f16ee05151d2e76891e786bb1d"),
];

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `bytes` are the file `relative` as shipped.
pub fn is_shipped(relative: &str, bytes: &[u8]) -> bool {
    SHIPPED.iter().any(|&(path, hash)| path == relative && hash == sha256(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::PHASES;

    /// Run by CI on a pristine checkout (ignored by `cargo test`, where a learner's edits would
    /// fail it): every file of the exercise crates has its hash in the table.
    #[test]
    #[ignore = "true only on a pristine checkout; CI runs it"]
    fn shipped_stubs() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workbook root");
        let mut files = Vec::new();
        for phase in PHASES {
            let mut pending = vec![root.join(phase.exercises_dir)];
            while let Some(dir) = pending.pop() {
                for entry in std::fs::read_dir(&dir).expect("an exercise crate").flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        pending.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        files.push(path.strip_prefix(root).expect("inside").display().to_string());
                    }
                }
            }
        }
        files.sort();
        let table: Vec<String> = files
            .iter()
            .map(|relative| {
                format!("    (\"{relative}\", \"{}\"),", sha256(&std::fs::read(root.join(relative)).expect("a file")))
            })
            .collect();
        let expected: Vec<String> = SHIPPED.iter().map(|(p, h)| format!("    (\"{p}\", \"{h}\"),")).collect();
        assert!(
            table == expected,
            "the shipped stubs changed; the table in grader/src/stubs.rs should read:\n{}",
            table.join("\n")
        );
    }

    #[test]
    fn bytes_are_hashed_as_they_are() {
        assert_eq!(sha256(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_ne!(sha256(b"a\n"), sha256(b"a\r\n"));
    }
}
