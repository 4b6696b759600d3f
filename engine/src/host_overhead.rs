//! The host time an interpreter would add, on purpose: PyTorch runs in Python, so every eager op
//! and every call of a compiled graph pays the interpreter before any kernel is launched. The
//! engine is Rust and pays far less, which moves its crossover (the batch from which compiled
//! code wins) to the smallest batches. `ENGINE_HOST_OVERHEAD=python`, or [`set`], adds PyTorch's
//! host costs back, as measured with `bench/torch/overhead.py` (see `bench/NOTES-overhead.md`),
//! so that a sweep shows the crossover PyTorch has, and why.
//!
//! The host is kept busy (a spin on the calling thread, as the interpreter would keep it): on a
//! GPU, work already queued runs meanwhile, so the cost hides behind large kernels and shows on
//! small ones, which is the point. Off (the default), each launch pays two atomic loads and a
//! branch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, RwLock};
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::logs;

/// Host time added per eager op, per compiled graph call and per kernel a compiled graph launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOverhead {
    /// Each eager op that launches a kernel (PyTorch: Python, argument parsing, the dispatcher).
    /// Also each op of a graph that a backend runs op by op, as `backend="eager"` does.
    pub eager_op: Duration,
    /// Each call of a compiled graph, its launches aside (PyTorch: Dynamo's guards, AOTAutograd's
    /// runtime wrappers and Inductor's Python `call` function).
    pub graph_call: Duration,
    /// Each kernel or library call a compiled graph launches (PyTorch: a line of Inductor's `call`
    /// function, a Python call into a launcher, and the buffers it allocates).
    pub compiled_launch: Duration,
}

impl HostOverhead {
    /// Nothing added: the engine's own costs only.
    pub const NONE: HostOverhead =
        HostOverhead { eager_op: Duration::ZERO, graph_call: Duration::ZERO, compiled_launch: Duration::ZERO };

    /// PyTorch 2.11's host costs on CUDA tensors (an H200's 16-core host, `bench/torch/overhead.py`):
    /// 7.0 us per eager op; 27.5 us per call of a one-kernel compiled function, of which 11.8 us is
    /// what each launch adds (measured as each further library call's cost), so 16 us for the call.
    pub const PYTHON_CUDA: HostOverhead = HostOverhead {
        eager_op: Duration::from_micros(7),
        graph_call: Duration::from_micros(16),
        compiled_launch: Duration::from_micros(12),
    };

    /// The same on CPU tensors: 5.6 us per eager op; 18.7 us per one-kernel call, 1.0 us per launch.
    pub const PYTHON_CPU: HostOverhead = HostOverhead {
        eager_op: Duration::from_micros(6),
        graph_call: Duration::from_micros(18),
        compiled_launch: Duration::from_micros(1),
    };
}

/// What to add: nothing, PyTorch's costs for the device the work runs on, or fixed costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The engine's own costs only (the default).
    Off,
    /// [`HostOverhead::PYTHON_CUDA`] on a GPU, [`HostOverhead::PYTHON_CPU`] on the CPU.
    Python,
    /// The same costs on every device.
    Fixed(HostOverhead),
}

impl Setting {
    /// Reads a setting: `python`, `off`, or three numbers of microseconds, `EAGER_OP,GRAPH_CALL,
    /// COMPILED_LAUNCH` (`6,18,1`).
    pub fn parse(value: &str) -> Result<Setting, String> {
        match value.trim() {
            "python" => return Ok(Setting::Python),
            "off" | "" => return Ok(Setting::Off),
            _ => {}
        }
        let parsed: Result<Vec<f64>, _> = value.split(',').map(|v| v.trim().parse::<f64>()).collect();
        let form = "`python`, `off` or three numbers of microseconds, none negative, such as `6,18,1`";
        match parsed.as_deref() {
            Ok(&[op, call, launch]) if [op, call, launch].iter().all(|m| m.is_finite() && *m >= 0.0) => {
                Ok(Setting::Fixed(HostOverhead {
                    eager_op: Duration::from_secs_f64(op * 1e-6),
                    graph_call: Duration::from_secs_f64(call * 1e-6),
                    compiled_launch: Duration::from_secs_f64(launch * 1e-6),
                }))
            }
            _ => Err(format!("{value:?} is not {form}")),
        }
    }

    /// The costs this setting adds to work on `device`.
    pub fn on(self, device: Device) -> HostOverhead {
        match (self, device) {
            (Setting::Off, _) => HostOverhead::NONE,
            (Setting::Python, Device::Cpu) => HostOverhead::PYTHON_CPU,
            (Setting::Python, Device::Cuda(_)) => HostOverhead::PYTHON_CUDA,
            (Setting::Fixed(costs), _) => costs,
        }
    }
}

static READ_ENV: Once = Once::new();
static ON: AtomicBool = AtomicBool::new(false);
static SETTING: RwLock<Setting> = RwLock::new(Setting::Off);

/// Reads `ENGINE_HOST_OVERHEAD` once, before the first use.
fn read_env() {
    READ_ENV.call_once(|| {
        let Ok(value) = std::env::var("ENGINE_HOST_OVERHEAD") else { return };
        let setting = Setting::parse(&value).unwrap_or_else(|message| {
            logs::warn(|| format!("ENGINE_HOST_OVERHEAD={message}; adding no host overhead"));
            Setting::Off
        });
        store(setting);
    });
}

fn store(setting: Setting) {
    *SETTING.write().unwrap_or_else(|e| e.into_inner()) = setting;
    ON.store(setting != Setting::Off && setting != Setting::Fixed(HostOverhead::NONE), Ordering::Relaxed);
}

/// Sets the host overhead for the whole process, over `ENGINE_HOST_OVERHEAD`.
pub fn set(setting: Setting) {
    read_env();
    store(setting);
}

/// The setting in force.
pub fn get() -> Setting {
    read_env();
    *SETTING.read().unwrap_or_else(|e| e.into_inner())
}

/// What is being paid for.
#[derive(Clone, Copy)]
pub(crate) enum Cost {
    EagerOp,
    GraphCall,
    CompiledLaunch,
}

/// Keeps this thread busy for the host time `cost` is set to on `device` (nothing when off).
#[inline]
pub(crate) fn pay(cost: Cost, device: Device) {
    read_env();
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let costs = get().on(device);
    let wait = match cost {
        Cost::EagerOp => costs.eager_op,
        Cost::GraphCall => costs.graph_call,
        Cost::CompiledLaunch => costs.compiled_launch,
    };
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
        assert_eq!(Setting::parse("python"), Ok(Setting::Python));
        assert_eq!(Setting::parse("off"), Ok(Setting::Off));
        assert_eq!(Setting::parse(" 6, 18 ,1 "), Ok(Setting::Fixed(HostOverhead::PYTHON_CPU)));
        let Ok(Setting::Fixed(half)) = Setting::parse("0.5,0,0") else { panic!("three numbers are fixed costs") };
        assert_eq!(half.eager_op, Duration::from_nanos(500));
        for bad in ["pyton", "6,25", "6,25,1,1", "-1,2,3", "a,b,c", "nan,1,1"] {
            let err = Setting::parse(bad).unwrap_err();
            assert!(err.contains("microseconds"), "{bad}: {err}");
        }
        assert_eq!(Setting::Python.on(Device::Cuda(1)), HostOverhead::PYTHON_CUDA);
        assert_eq!(Setting::Python.on(Device::Cpu), HostOverhead::PYTHON_CPU);
    }
}
