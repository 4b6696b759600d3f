//! First calls timed in a fresh process: how `compiled`, `models` and `regional` measure a compile
//! against an empty kernel cache (cold) and against the cache the cold run filled (warm). The
//! parent runs a hidden subcommand of this binary with `ENGINE_CACHE_DIR` set; the child prints
//! its first call's time and the compile's stages as `key=value` lines, which the parent reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use engine::compile_time::Stage;
use engine::dynamo::CompileStats;

/// What a child process measured: the first call's wall-clock time (tracing, compiling, loading
/// and running once, synchronised), and the compile's time by stage.
#[derive(Clone, Debug, Default)]
pub struct FirstCall {
    /// Seconds from the call to its result on the host.
    pub seconds: f64,
    /// Seconds the compiled function counted as compiling (`CompileStats::compile_time`).
    pub compile_seconds: f64,
    /// Seconds per stage, for the stages that took any time.
    pub stages: Vec<(String, f64)>,
}

impl FirstCall {
    /// The stages as one line: `lowering 2.0 ms, c compile 95.1 ms, ...`.
    pub fn stages_line(&self) -> String {
        let parts: Vec<String> = self.stages.iter().map(|(s, t)| format!("{s} {:.1} ms", t * 1e3)).collect();
        parts.join(", ")
    }

    /// As JSON, milliseconds.
    pub fn to_json(&self) -> serde_json::Value {
        let stages: serde_json::Map<String, serde_json::Value> =
            self.stages.iter().map(|(s, t)| (s.clone(), serde_json::json!(t * 1e3))).collect();
        serde_json::json!({ "first_call_ms": self.seconds * 1e3, "compile_ms": self.compile_seconds * 1e3, "stages_ms": stages })
    }
}

/// A kernel cache directory of this process's own, removed when dropped.
pub struct FreshCache(PathBuf);

impl FreshCache {
    /// A new, empty directory named after `what`.
    pub fn new(what: &str) -> FreshCache {
        let dir = std::env::temp_dir().join(format!("engine-bench-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        FreshCache(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FreshCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs this binary with `args` (a hidden first-call subcommand) and `ENGINE_CACHE_DIR` at
/// `cache`, and reads what it measured.
pub fn in_new_process(args: &[String], cache: &Path) -> Result<FirstCall> {
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let output = Command::new(exe)
        .args(args)
        .env("ENGINE_CACHE_DIR", cache)
        .output()
        .with_context(|| format!("running bench {}", args.join(" ")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("bench {} failed:\n{stdout}\n{}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    }
    let value = |key: &str| -> Result<f64> {
        let text = stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            .with_context(|| format!("bench {} printed no {key}", args.join(" ")))?;
        Ok(text.trim().parse()?)
    };
    let stages = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("stage "))
        .filter_map(|l| l.split_once('='))
        .filter_map(|(name, v)| v.trim().parse().ok().map(|v| (name.to_string(), v)))
        .collect();
    Ok(FirstCall { seconds: value("first_call_seconds")?, compile_seconds: value("compile_seconds")?, stages })
}

/// The child's side: prints the first call's time and `stats`' compile time and stages, for
/// [`in_new_process`].
pub fn report(first_call_seconds: f64, stats: &CompileStats) {
    println!("first_call_seconds={first_call_seconds}");
    println!("compile_seconds={}", stats.compile_time.as_secs_f64());
    for stage in Stage::ALL {
        let t = stats.stages.get(stage);
        if !t.is_zero() {
            println!("stage {}={}", stage.name(), t.as_secs_f64());
        }
    }
}
