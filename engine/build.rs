//! Sets `ENGINE_SOURCE_HASH`, a hash of the engine's own source (`src/` and `Cargo.toml`): the
//! build identity that keys the FX graph cache (`inductor::modes::fx_graph_cache`), as PyTorch keys its
//! cache on a hash of its own source, so that an artifact compiled by other engine code is never
//! loaded. FNV-1a over the sorted paths and bytes: no dependency, and collisions only need to be
//! unlikely between builds, not resistant to an adversary.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let mut files = vec![PathBuf::from("Cargo.toml")];
    collect(Path::new("src"), &mut files);
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in &files {
        let bytes = fs::read(file).unwrap_or_default();
        let name = file.to_string_lossy();
        let parts: [&[u8]; 3] = [name.as_bytes(), &(bytes.len() as u64).to_le_bytes(), &bytes];
        for part in parts {
            for &b in part {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    println!("cargo:rustc-env=ENGINE_SOURCE_HASH={hash:016x}");
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
