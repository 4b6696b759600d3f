//! The host time an interpreter would add, on purpose: PyTorch runs in Python, so every eager op
//! and every call of a compiled graph pays the interpreter before any kernel is launched. The
//! engine is Rust and pays far less, which moves its crossover (the batch from which compiled
//! code wins) to the smallest batches. `ENGINE_HOST_OVERHEAD=python`, or [`set`], adds PyTorch's
//! host costs back, measured with `bench/torch/overhead.py` (see `bench/NOTES-overhead.md`), so
//! that a sweep shows the crossover PyTorch has, and why.
//!
//! The host is kept busy (a spin on the calling thread, as the interpreter would keep it): on a
//! GPU, work already queued runs meanwhile, so the cost hides behind large kernels and shows on
//! small ones, which is the point. Off (the default), each launch pays two atomic loads and a
//! branch.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::logs;

/// Host time added per eager op, per compiled graph call and per kernel a compiled graph launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOverhead {
    /// Each eager op (PyTorch: Python, argument parsing, the dispatcher). Also each op of a graph
    /// that a backend runs op by op, as `backend="eager"` does in PyTorch.
    pub eager_op: Duration,
    /// Each call of a compiled graph (PyTorch: Dynamo's guards, AOTAutograd's runtime wrappers
    /// and Inductor's Python `call` function).
    pub graph_call: Duration,
    /// Each kernel or library call a compiled graph launches (PyTorch: one line of Inductor's
    /// `call` function, a Python call into the kernel's launcher).
    pub compiled_launch: Duration,
}

impl HostOverhead {
    /// Nothing added: the engine's own costs only.
    pub const NONE: HostOverhead =
        HostOverhead { eager_op: Duration::ZERO, graph_call: Duration::ZERO, compiled_launch: Duration::ZERO };

    /// PyTorch 2.11's host costs, rounded from `bench/torch/overhead.py` on a 16-core host with
    /// an H200: 5.6 to 7.0 us per eager op, 19 to 28 us per call of a one-kernel compiled
    /// function, about 1 us per further library call in it.
    pub const PYTHON: HostOverhead = HostOverhead {
        eager_op: Duration::from_micros(6),
        graph_call: Duration::from_micros(25),
        compiled_launch: Duration::from_micros(1),
    };

    /// Reads a setting: `python`, `off`, or three numbers of microseconds, `EAGER_OP,GRAPH_CALL,
    /// COMPILED_LAUNCH` (`6,25,1` is `python`).
    pub fn parse(value: &str) -> Result<HostOverhead, String> {
        match value.trim() {
            "python" => return Ok(HostOverhead::PYTHON),
            "off" | "" => return Ok(HostOverhead::NONE),
            _ => {}
        }
        let micros: Vec<f64> =
            value.split(',').map(|v| v.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|_| {
                format!("{value:?} is not `python`, `off` or three numbers of microseconds such as `6,25,1`")
            })?;
        match micros[..] {
            [op, call, launch] if micros.iter().all(|m| m.is_finite() && *m >= 0.0) => Ok(HostOverhead {
                eager_op: Duration::from_secs_f64(op * 1e-6),
                graph_call: Duration::from_secs_f64(call * 1e-6),
                compiled_launch: Duration::from_secs_f64(launch * 1e-6),
            }),
            _ => Err(format!("{value:?} must be three numbers of microseconds, none negative, such as `6,25,1`")),
        }
    }
}

/// The setting in force, in nanoseconds, and whether any of it is non-zero.
struct State {
    on: AtomicBool,
    nanos: [AtomicU64; 3],
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| {
        let overhead = match std::env::var("ENGINE_HOST_OVERHEAD") {
            Ok(value) => HostOverhead::parse(&value).unwrap_or_else(|message| {
                logs::warn(|| format!("ENGINE_HOST_OVERHEAD={message}; adding no host overhead"));
                HostOverhead::NONE
            }),
            Err(_) => HostOverhead::NONE,
        };
        let state = State { on: AtomicBool::new(false), nanos: Default::default() };
        store(&state, overhead);
        state
    })
}

fn store(state: &State, overhead: HostOverhead) {
    let parts = [overhead.eager_op, overhead.graph_call, overhead.compiled_launch];
    for (slot, part) in state.nanos.iter().zip(parts) {
        slot.store(part.as_nanos() as u64, Ordering::Relaxed);
    }
    state.on.store(overhead != HostOverhead::NONE, Ordering::Relaxed);
}

/// Sets the host overhead for the whole process, over `ENGINE_HOST_OVERHEAD`.
pub fn set(overhead: HostOverhead) {
    store(state(), overhead);
}

/// The host overhead in force.
pub fn get() -> HostOverhead {
    let nanos = |i: usize| Duration::from_nanos(state().nanos[i].load(Ordering::Relaxed));
    HostOverhead { eager_op: nanos(0), graph_call: nanos(1), compiled_launch: nanos(2) }
}

/// What is being paid for.
#[derive(Clone, Copy)]
pub(crate) enum Cost {
    EagerOp = 0,
    GraphCall = 1,
    CompiledLaunch = 2,
}

/// Keeps this thread busy for the host time `cost` is set to (nothing when off).
#[inline]
pub(crate) fn pay(cost: Cost) {
    let state = state();
    if !state.on.load(Ordering::Relaxed) {
        return;
    }
    let wait = Duration::from_nanos(state.nanos[cost as usize].load(Ordering::Relaxed));
    let start = Instant::now();
    while start.elapsed() < wait {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_or_refused_with_the_expected_form() {
        assert_eq!(HostOverhead::parse("python"), Ok(HostOverhead::PYTHON));
        assert_eq!(HostOverhead::parse("off"), Ok(HostOverhead::NONE));
        assert_eq!(HostOverhead::parse(" 6, 25 ,1 "), Ok(HostOverhead::PYTHON));
        let half = HostOverhead::parse("0.5,0,0").unwrap();
        assert_eq!(half.eager_op, Duration::from_nanos(500));
        for bad in ["pyton", "6,25", "6,25,1,1", "-1,2,3", "a,b,c", "nan,1,1"] {
            let err = HostOverhead::parse(bad).unwrap_err();
            assert!(err.contains("microseconds"), "{bad}: {err}");
        }
    }
}
