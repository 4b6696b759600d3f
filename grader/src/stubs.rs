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
    (
        "exercises/phase1-backends/examples/scratch.rs",
        "ef8c548e998dd14e630c07683139a6989c0654023c851d483c4aab350e02d7bd",
    ),
    ("exercises/phase1-backends/src/compare.rs", "b9551f20070bbc789cf8825410c15fe81c932a269cd2ad406c55792c22b802b8"),
    ("exercises/phase1-backends/src/deny_ops.rs", "885575dfeaf457e03b0ca25bb6aeff75cf03476ba8e2de9eceba02cf02d791f9"),
    (
        "exercises/phase1-backends/src/interpreter.rs",
        "53d0d24d54291933ce34f59c22ffa11326d78500539feaab40361bbf4a980914",
    ),
    ("exercises/phase1-backends/src/latency.rs", "047734c9bb10a69232a698999d2a0df7446e31e2841ca246c98adb31df099e0c"),
    ("exercises/phase1-backends/src/lib.rs", "504667ec9e74ea7fc6089ae5dc52135a91dae52fe14f15170dc8d80270feab3c"),
    ("exercises/phase1-backends/src/recording.rs", "95c76237dfdda4aecc8a89cc2d1468788b7612af31d5ecc345bcc06e11cad237"),
    (
        "exercises/phase2-capture/examples/scratch.rs",
        "0946af34641a78f9aa93c7be4880539222b9dcd94bf697c44f30ccb2826d0628",
    ),
    ("exercises/phase2-capture/src/cse.rs", "73d93026d904e2f84e1ce6a0345591884b13f2abb28ca6fc6b8946b65c81328b"),
    ("exercises/phase2-capture/src/dead_code.rs", "1679a5756f6edd6a235fa316ce6488c95dff4595b811031a3d111c0f037af050"),
    (
        "exercises/phase2-capture/src/explain_report.rs",
        "2839c215b141a7ed45b9a04ee0ea1ae0940160328c551b403bbdefab1cf95714",
    ),
    ("exercises/phase2-capture/src/lib.rs", "d4e2473c4270ce3b3a6db118f0efc7e9d06a596c0fb8f28710adcdc1097fd5cb"),
    ("exercises/phase2-capture/src/line_table.rs", "d12627eb7a08f4c6bd86c03956a81a99b7ce466170d178b7ee3c11000aa6150e"),
    ("exercises/phase2-capture/src/shape_prop.rs", "5764f96b4c5b2903366fedf331462188acaf5ebc52e140c3d6124560b41a73db"),
    (
        "exercises/phase3-graph-breaks/examples/scratch.rs",
        "c0eaa42ab0144967b5dba290ebd968550e88bc8481c7689eed6959a5e70683c2",
    ),
    ("exercises/phase3-graph-breaks/src/branch.rs", "650a5ba7b6bf53b9ae13fb65e9516b3b754514f706e8c2cc1a74f01bda0e7afc"),
    (
        "exercises/phase3-graph-breaks/src/break_cost.rs",
        "96049b8e537d1d49f54ac10413403e751a3f40f88a5b3a717a18300fcad1b13c",
    ),
    (
        "exercises/phase3-graph-breaks/src/custom_op.rs",
        "b9fd2a7d24043bc7c165241a839300b5c8cf7a435fcf8d64a241528f2d7a198d",
    ),
    ("exercises/phase3-graph-breaks/src/lib.rs", "ae5b3215be2979e7c7813643c9221e87cc6ab03cd1c85375deb71e42c6c50399"),
    (
        "exercises/phase3-graph-breaks/src/logging.rs",
        "b7eb7c3fec3c4980cb35e9d90c34ae697bddaae8eda4f2d0b40253b69be990b5",
    ),
    (
        "exercises/phase3-graph-breaks/src/round_trip.rs",
        "f6615c1a17915e71ad7114f544e016d26aa5cf598bb10216b624ef627f1e903e",
    ),
    (
        "exercises/phase4-codegen/examples/scratch.rs",
        "039863def9a1145a001e8cd4115efd6ac3e9fa6b6646a8c955d7edc1bb0580f6",
    ),
    ("exercises/phase4-codegen/src/fusion.rs", "8175e01a86f1a1e38024164444b8e61dcffcdf6356dec3c2845daf94573b71f2"),
    ("exercises/phase4-codegen/src/inspect.rs", "36b9328e0f9040b20acccceb7704ff0c6420b7505a3d726f5c6e40d5d963d889"),
    ("exercises/phase4-codegen/src/lib.rs", "3e2faefe6372820928f7dc9116f9d179e73847d5feb39f56cc17f04c299bfe98"),
    ("exercises/phase4-codegen/src/pointwise.rs", "93ed9963a3177f8740b84fac523cb2cd82d8f824e07cc47020f15d0feab21494"),
    ("exercises/phase4-codegen/src/reduction.rs", "abb7e9ce88f7178e025573153c050ffdac46b3f16ee05151d2e76891e786bb1d"),
    (
        "exercises/phase5-benchmarking/examples/scratch.rs",
        "1a533766066a18900929b607952734a04e71745b202e3c192cc1ce8a69028983",
    ),
    (
        "exercises/phase5-benchmarking/src/break_even.rs",
        "542f9a8aaf2e475a54a61204c91815fbf5f86cd0d1f28739ce643fb03eb41672",
    ),
    (
        "exercises/phase5-benchmarking/src/challenge.rs",
        "e12f6bd2bb8047305d60ce22384ba15de53a579cae7b4e0facb80450529ef38f",
    ),
    ("exercises/phase5-benchmarking/src/lib.rs", "0b069de778df8c6babe642370fcaa943771eeaa8bee360aa8b1dcfe58208384e"),
    ("exercises/phase5-benchmarking/src/modes.rs", "7523b31d378497f6663b587a3e712eaeb33641c818825f8e81121ac3a0d9cbc1"),
    (
        "exercises/phase5-benchmarking/src/profile.rs",
        "aa9d56ad3526516a4fe8376eada4037102f75f4061d9f96f7082556c4889abde",
    ),
    ("exercises/phase5-benchmarking/src/sweep.rs", "2f6e158b5e307159af1b1d1521505eb180ef83bcdbd66ec49cf39c772a962c1b"),
    ("exercises/phase5-benchmarking/src/timer.rs", "c348b5222cf101d58fcec2ccf7d71f10b06e855011da9b5193ae7c3887583a74"),
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
