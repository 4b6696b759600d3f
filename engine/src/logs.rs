//! Structured logs to stderr, the analogue of `TORCH_LOGS`: `ENGINE_LOGS=graph,recompiles` (or
//! [`set_logs`] from code) turns on named artifacts, and each enabled message prints as
//! `[engine:<artifact>] <message>`. [`capture`] collects the lines of chosen artifacts on the
//! calling thread instead, for tests and graders.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// One kind of log message that can be switched on by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Artifact {
    /// Each captured graph, printed as code.
    Graph,
    /// Each graph break with its reason and source line.
    GraphBreaks,
    /// Each recompile, naming the guard that failed.
    Recompiles,
    /// The guards installed for each compiled graph.
    Guards,
    /// Fusion decisions, including the reason for each refusal.
    Fusion,
    /// The generated kernels and call plan.
    OutputCode,
    /// Reduce-overhead's decisions: each CUDA graph recorded, and why one is skipped.
    Cudagraphs,
    /// Max-autotune's candidates, their times and the choice.
    Autotuning,
    /// The FX graph cache's decision for each compile: hit, miss (and stored), or bypass and why.
    FxGraphCache,
    /// AOTAutograd's joint graph of each graph compiled for training, its forward and backward
    /// graphs, and what the forward saves for the backward.
    AotGraphs,
    /// Where each compile's time went, by stage, with every C or NVRTC compile and every load.
    CompileTime,
    /// Warnings: something the user should know (a recompile limit hit, a corrupt cache entry,
    /// a missing GPU). Always printed, whatever `ENGINE_LOGS` says; [`capture`] can collect them.
    Warnings,
}

impl Artifact {
    /// Every artifact, in the order `ENGINE_LOGS=all` lists them.
    pub const ALL: [Artifact; 12] = [
        Artifact::Graph,
        Artifact::GraphBreaks,
        Artifact::Recompiles,
        Artifact::Guards,
        Artifact::Fusion,
        Artifact::OutputCode,
        Artifact::Cudagraphs,
        Artifact::Autotuning,
        Artifact::FxGraphCache,
        Artifact::AotGraphs,
        Artifact::CompileTime,
        Artifact::Warnings,
    ];

    /// The name used in `ENGINE_LOGS` and in each message's prefix.
    pub fn name(self) -> &'static str {
        match self {
            Artifact::Graph => "graph",
            Artifact::GraphBreaks => "graph_breaks",
            Artifact::Recompiles => "recompiles",
            Artifact::Guards => "guards",
            Artifact::Fusion => "fusion",
            Artifact::OutputCode => "output_code",
            Artifact::Cudagraphs => "cudagraphs",
            Artifact::Autotuning => "autotuning",
            Artifact::FxGraphCache => "fx_graph_cache",
            Artifact::AotGraphs => "aot_graphs",
            Artifact::CompileTime => "compile_time",
            Artifact::Warnings => "warnings",
        }
    }

    fn bit(self) -> u32 {
        1 << Artifact::ALL.iter().position(|&a| a == self).expect("listed in ALL")
    }
}

/// Bits set by [`set_logs`], or `u32::MAX` for "not set, use the environment".
static OVERRIDE: AtomicU32 = AtomicU32::new(u32::MAX);

/// The artifacts named in `ENGINE_LOGS`, read once. Unknown names are reported once and ignored.
fn from_env() -> u32 {
    static BITS: OnceLock<u32> = OnceLock::new();
    *BITS.get_or_init(|| {
        let Ok(value) = std::env::var("ENGINE_LOGS") else { return 0 };
        parse(&value).unwrap_or_else(|unknown| {
            warn(|| {
                format!(
                    "ENGINE_LOGS: unknown artifact `{unknown}`; known: all, {}",
                    Artifact::ALL.map(Artifact::name).join(", ")
                )
            });
            parse_known(&value)
        })
    })
}

fn parse_known(value: &str) -> u32 {
    value.split(',').filter_map(|n| lookup(n.trim())).fold(0, |acc, bits| acc | bits)
}

fn lookup(name: &str) -> Option<u32> {
    if name == "all" {
        return Some(Artifact::ALL.iter().fold(0, |acc, a| acc | a.bit()));
    }
    Artifact::ALL.iter().find(|a| a.name() == name).map(|a| a.bit())
}

/// Parses a comma-separated list of artifact names (`all` for every one); returns the first
/// unknown name on failure.
fn parse(value: &str) -> Result<u32, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .try_fold(0, |acc, name| lookup(name).map(|bits| acc | bits).ok_or_else(|| name.to_string()))
}

/// Turns on exactly these artifacts from code, overriding `ENGINE_LOGS` (an empty slice turns
/// logging off).
pub fn set_logs(artifacts: &[Artifact]) {
    OVERRIDE.store(artifacts.iter().fold(0, |acc, a| acc | a.bit()), Ordering::Relaxed);
}

/// Whether messages of this artifact are printed (warnings always are).
pub fn enabled(artifact: Artifact) -> bool {
    if artifact == Artifact::Warnings {
        return true;
    }
    let bits = match OVERRIDE.load(Ordering::Relaxed) {
        u32::MAX => from_env(),
        bits => bits,
    };
    bits & artifact.bit() != 0
}

thread_local! {
    /// While [`capture`] runs on this thread: the artifacts it collects and the lines so far.
    static CAPTURED: RefCell<Option<(u32, String)>> = const { RefCell::new(None) };
}

/// Prints `message` under `artifact` if it is enabled (or collects it, inside [`capture`]). Build
/// the message lazily so that disabled logs cost nothing on hot paths.
pub fn log(artifact: Artifact, message: impl FnOnce() -> String) {
    let captured = CAPTURED.with(|c| c.borrow().as_ref().is_some_and(|(bits, _)| bits & artifact.bit() != 0));
    if !captured && !enabled(artifact) {
        return;
    }
    let text: String = message().lines().map(|line| format!("[engine:{}] {line}\n", artifact.name())).collect();
    if captured {
        CAPTURED.with(|c| c.borrow_mut().as_mut().expect("checked above").1.push_str(&text));
    } else {
        eprint!("{text}");
    }
}

/// Prints a warning, `[engine:warnings] message`, or collects it inside [`capture`]: how library
/// code tells the user something, rather than a bare `eprintln!`.
pub fn warn(message: impl FnOnce() -> String) {
    log(Artifact::Warnings, message);
}

/// Runs `f` and returns its result with the log lines of `artifacts` it produced on this thread,
/// in the format stderr would show; those lines are not printed.
pub fn capture<R>(artifacts: &[Artifact], f: impl FnOnce() -> R) -> (R, String) {
    let bits = artifacts.iter().fold(0, |acc, a| acc | a.bit());
    let outer = CAPTURED.with(|c| c.borrow_mut().replace((bits, String::new())));
    let result = f();
    let (_, text) = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer)).expect("set above");
    (result, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_collects_only_the_chosen_artifacts() {
        let ((), text) = capture(&[Artifact::Recompiles], || {
            log(Artifact::Recompiles, || "first\nsecond".into());
            log(Artifact::Fusion, || "not collected".into());
        });
        assert_eq!(text, "[engine:recompiles] first\n[engine:recompiles] second\n");
    }

    #[test]
    fn warnings_are_always_on_and_capturable() {
        assert!(enabled(Artifact::Warnings));
        let ((), text) = capture(&[Artifact::Warnings], || warn(|| "careful".into()));
        assert_eq!(text, "[engine:warnings] careful\n");
    }

    #[test]
    fn parses_names_and_all() {
        assert_eq!(parse("graph, recompiles").unwrap(), Artifact::Graph.bit() | Artifact::Recompiles.bit());
        assert_eq!(parse("all").unwrap().count_ones(), Artifact::ALL.len() as u32);
        assert_eq!(parse("graph,bogus"), Err("bogus".to_string()));
    }
}
