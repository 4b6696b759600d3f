//! A directory of build outputs keyed by a hash of everything that determines them. Each entry
//! has a checksum beside it, so a truncated or corrupt file is noticed, reported and rebuilt
//! instead of being loaded.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A hex SHA-256 over every part, each length-prefixed so that `["ab", "c"]` and `["a", "bc"]`
/// differ. Put in every input that changes the output: source, compiler version, flags, target.
pub fn cache_key(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The on-disk cache: `ENGINE_CACHE_DIR` if set, else `$XDG_CACHE_HOME/engine` or
/// `~/.cache/engine`, else a folder in the system temp directory.
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// The process-wide cache at the configured location, or, when that cannot be written, in a
    /// folder of the system temp directory, with one warning: an unwritable cache is a set-up
    /// matter that costs compile time, never a reason to fail.
    pub fn global() -> &'static DiskCache {
        static CACHE: OnceLock<DiskCache> = OnceLock::new();
        CACHE.get_or_init(|| {
            let configured = default_dir();
            match writable(&configured) {
                Ok(()) => DiskCache::at(configured),
                Err(e) => {
                    let fallback = std::env::temp_dir().join("engine-cache-fallback");
                    crate::logs::warn(|| {
                        format!(
                            "the kernel cache {} cannot be written ({e}); using {} instead. Set ENGINE_CACHE_DIR to \
                             a writable folder (`grader doctor` checks it).",
                            configured.display(),
                            fallback.display()
                        )
                    });
                    DiskCache::at(fallback)
                }
            }
        })
    }

    /// The cache at the configured location (`ENGINE_CACHE_DIR`, else the user's cache folder), as
    /// the environment says now, without the global cache's fallback: a process about to point
    /// `ENGINE_CACHE_DIR` elsewhere can still read the cache it was given.
    pub fn configured() -> DiskCache {
        DiskCache::at(default_dir())
    }

    /// A cache rooted at `dir` (created on first store).
    pub fn at(dir: PathBuf) -> DiskCache {
        DiskCache { dir }
    }

    /// Where entries are stored.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the entry `key` with file extension `ext`, building it with `build` when it is
    /// missing or fails its checksum. `build` writes the artefact to the path it is given (a
    /// temporary name; the entry appears atomically once it succeeds). Returns the entry's path
    /// and whether it was built now.
    pub fn get_or_build(
        &self,
        key: &str,
        ext: &str,
        build: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<(PathBuf, bool)> {
        let path = self.dir.join(format!("{key}.{ext}"));
        if self.read(key, ext).is_some() {
            return Ok((path, false));
        }
        fs::create_dir_all(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        let tmp = unique_temp(&path);
        let built = build(&tmp)
            .and_then(|()| fs::read(&tmp).map_err(|e| io_error(&tmp, e)))
            .and_then(|bytes| self.install(&tmp, &bytes, key, ext));
        if built.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        built.map(|()| (path, true))
    }

    /// The bytes of entry `key` with extension `ext`, when it is there and passes its checksum; a
    /// corrupt entry is reported, removed and read as missing.
    pub fn read(&self, key: &str, ext: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(format!("{key}.{ext}"));
        let checksum_path = self.dir.join(format!("{key}.{ext}.sha256"));
        match verify(&path, &checksum_path) {
            Entry::Valid(bytes) => Some(bytes),
            Entry::Missing => None,
            Entry::Corrupt(why) => {
                crate::logs::warn(|| format!("cache entry {} is corrupt ({why}); rebuilding it", path.display()));
                let _ = fs::remove_file(&path);
                let _ = fs::remove_file(&checksum_path);
                None
            }
        }
    }

    /// Stores `bytes` as entry `key` with extension `ext`, replacing any entry there.
    pub fn write(&self, key: &str, ext: &str, bytes: &[u8]) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        let tmp = unique_temp(&self.dir.join(format!("{key}.{ext}")));
        let written =
            fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, e)).and_then(|()| self.install(&tmp, bytes, key, ext));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    /// Makes the finished file `tmp`, holding `bytes`, entry `key`: its checksum first, then the
    /// entry itself, each appearing atomically.
    fn install(&self, tmp: &Path, bytes: &[u8], key: &str, ext: &str) -> Result<()> {
        let path = self.dir.join(format!("{key}.{ext}"));
        write_atomically(&self.dir.join(format!("{key}.{ext}.sha256")), hex(&Sha256::digest(bytes)).as_bytes())?;
        fs::rename(tmp, &path).map_err(|e| io_error(&path, e))
    }
}

enum Entry {
    Valid(Vec<u8>),
    Missing,
    Corrupt(String),
}

fn verify(path: &Path, checksum_path: &Path) -> Entry {
    let Ok(bytes) = fs::read(path) else { return Entry::Missing };
    match fs::read_to_string(checksum_path) {
        Ok(expected) if expected.trim() == hex(&Sha256::digest(&bytes)) => Entry::Valid(bytes),
        Ok(_) => Entry::Corrupt("checksum mismatch".into()),
        Err(_) => Entry::Corrupt("checksum file missing".into()),
    }
}

/// Whether files can be created in `dir` (creating it if needed).
pub fn writable(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let probe = unique_temp(&dir.join("write-probe"));
    fs::write(&probe, b"")?;
    fs::remove_file(&probe)
}

fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ENGINE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(xdg).join("engine");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("engine"),
        None => std::env::temp_dir().join("engine-cache"),
    }
}

/// A sibling name no other thread or process will pick.
fn unique_temp(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().expect("entry paths have a file name").to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    path.with_file_name(name)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = unique_temp(path);
    let mut file = fs::File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
    file.write_all(bytes).map_err(|e| io_error(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_error(path, e))
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io { path: path.to_path_buf(), message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(bytes: &'static [u8]) -> impl FnOnce(&Path) -> Result<()> {
        move |p| fs::write(p, bytes).map_err(|e| io_error(p, e))
    }

    fn temp_cache(name: &str) -> DiskCache {
        let dir = std::env::temp_dir().join(format!("engine-cache-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        DiskCache::at(dir)
    }

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(cache_key(&[b"ab", b"c"]), cache_key(&[b"a", b"bc"]));
        assert_eq!(cache_key(&[b"x"]).len(), 64);
    }

    #[test]
    fn builds_once_then_hits() {
        let cache = temp_cache("hits");
        let (path, built) = cache.get_or_build("k", "bin", write(b"artefact")).unwrap();
        assert!(built);
        let (again, built) = cache.get_or_build("k", "bin", |_| panic!("must not rebuild")).unwrap();
        assert_eq!((again, built), (path.clone(), false));
        assert_eq!(fs::read(path).unwrap(), b"artefact");
    }

    #[test]
    fn a_truncated_entry_is_rebuilt() {
        let cache = temp_cache("corrupt");
        let (path, _) = cache.get_or_build("k", "bin", write(b"good bytes")).unwrap();
        fs::write(&path, b"good").unwrap();
        let (_, built) = cache.get_or_build("k", "bin", write(b"good bytes")).unwrap();
        assert!(built);
        assert_eq!(fs::read(path).unwrap(), b"good bytes");
    }

    #[test]
    fn a_failed_build_leaves_no_entry() {
        let cache = temp_cache("failed");
        let failed = cache.get_or_build("k", "bin", |p| {
            fs::write(p, b"half").unwrap();
            Err(Error::Io { path: p.to_path_buf(), message: "compiler crashed".into() })
        });
        assert!(failed.is_err());
        assert_eq!(fs::read_dir(cache.dir()).unwrap().count(), 0);
    }
}
