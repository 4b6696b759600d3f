//! The parts a timer is made of, for anyone writing one: a timestamp on the device's own clock
//! (a CUDA event, like `torch.cuda.Event(enable_timing=True)`; the monotonic clock on the CPU) and
//! a cache flush (what `triton.testing.do_bench` does before each sample). [`super::Bench`] is
//! built from them, and so is the timer learners write in phase 5.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaEvent, sys::CUevent_flags};

use crate::device::Device;
use crate::device::cuda::{CudaDevice, CudaError};
use crate::error::{Error, Result, SourceLocation};

/// A point in time on a device's clock. Create stamps before the work to time (creating a CUDA
/// event costs host time), [`record`](Stamp::record) one just before and one just after, then
/// ask the later one for [`seconds_since`](Stamp::seconds_since) the earlier.
///
/// On a GPU, recording queues a timestamp on the device's stream: it is taken when the GPU gets
/// there, after every kernel queued before it, so two stamps bracket the device's work even
/// though launching returns at once.
pub struct Stamp {
    clock: Clock,
}

enum Clock {
    Cpu(Option<Instant>),
    Cuda { device: Arc<CudaDevice>, event: CudaEvent, recorded: bool },
}

impl Stamp {
    /// A stamp for `device`, not recorded yet.
    #[track_caller]
    pub fn new(device: Device) -> Result<Stamp> {
        let location = SourceLocation::caller();
        let clock = match device {
            Device::Cpu => Clock::Cpu(None),
            Device::Cuda(ordinal) => {
                let gpu = CudaDevice::get(ordinal)?;
                // CU_EVENT_DEFAULT: cudarc's default flags disable timing.
                let event = gpu
                    .context()
                    .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| CudaError::from(e).at("Stamp::new", device, Vec::new(), location))?;
                Clock::Cuda { device: gpu, event, recorded: false }
            }
        };
        Ok(Stamp { clock })
    }

    /// Takes the time now: at once on the CPU; on a GPU, when the device reaches this point of
    /// its stream. Recording again moves the stamp.
    #[track_caller]
    pub fn record(&mut self) -> Result<()> {
        let location = SourceLocation::caller();
        match &mut self.clock {
            Clock::Cpu(at) => {
                // Taken once the CPU's queued work is done, as a GPU's event is taken when the
                // GPU gets there (see `device::cpu::queue`).
                crate::device::cpu::queue::wait();
                *at = Some(Instant::now());
            }
            Clock::Cuda { device, event, recorded } => {
                event.record(device.stream()).map_err(|e| {
                    CudaError::from(e).at("Stamp::record", Device::Cuda(device.ordinal()), Vec::new(), location)
                })?;
                *recorded = true;
            }
        }
        Ok(())
    }

    /// Seconds from `start` to this stamp, both recorded, `start` first. On a GPU it waits until
    /// the device has reached this stamp.
    #[track_caller]
    pub fn seconds_since(&self, start: &Stamp) -> Result<f64> {
        let location = SourceLocation::caller();
        let invalid = |message: &str| Error::InvalidArgument {
            op: "Stamp::seconds_since",
            message: message.to_string(),
            location,
        };
        match (&start.clock, &self.clock) {
            (Clock::Cpu(Some(from)), Clock::Cpu(Some(to))) => Ok(to.duration_since(*from).as_secs_f64()),
            (
                Clock::Cuda { event: from, recorded: true, device: from_device },
                Clock::Cuda { event: to, recorded: true, device },
            ) if from_device.ordinal() == device.ordinal() => {
                let milliseconds = from.elapsed_ms(to).map_err(|e| {
                    CudaError::from(e).at("Stamp::seconds_since", Device::Cuda(device.ordinal()), Vec::new(), location)
                })?;
                Ok(f64::from(milliseconds) * 1e-3)
            }
            (Clock::Cpu(None) | Clock::Cuda { recorded: false, .. }, _)
            | (_, Clock::Cpu(None) | Clock::Cuda { recorded: false, .. }) => Err(invalid(
                "both stamps must be recorded (call `record()` on each) before reading the time between them",
            )),
            _ => Err(invalid("the two stamps are on different devices: time work on one device at a time")),
        }
    }
}

/// Evicts the caches between samples, so that one sample's inputs are not left warm for the next
/// (a kernel that finds its inputs in cache looks faster than it will be in a real model). On a
/// GPU it queues a read of twice the L2 cache on the device's stream; on the CPU it writes a
/// buffer larger than any last-level cache.
pub struct CacheFlush {
    device: Device,
    buffer: Vec<u8>,
    round: u8,
}

impl CacheFlush {
    /// A flush for `device`; its buffer is allocated on the first [`run`](CacheFlush::run).
    pub fn new(device: Device) -> CacheFlush {
        CacheFlush { device, buffer: Vec::new(), round: 0 }
    }

    /// Evicts the caches of the device (queued on a GPU: it does not wait).
    #[track_caller]
    pub fn run(&mut self) -> Result<()> {
        let location = SourceLocation::caller();
        match self.device {
            Device::Cpu => {
                if self.buffer.is_empty() {
                    self.buffer = vec![0; 64 << 20];
                }
                // A new value each time, so that no write can be skipped as already done.
                self.round = self.round.wrapping_add(1);
                self.buffer.fill(self.round);
                std::hint::black_box(&self.buffer);
                Ok(())
            }
            Device::Cuda(ordinal) => CudaDevice::get(ordinal)?
                .flush_l2()
                .map_err(|e| e.at("CacheFlush::run", self.device, Vec::new(), location)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stamps_bracket_the_work_between_them() {
        let device = Device::cuda_if_available();
        let (mut start, mut end) = (Stamp::new(device).unwrap(), Stamp::new(device).unwrap());
        assert!(end.seconds_since(&start).is_err(), "unrecorded stamps have no time between them");
        start.record().unwrap();
        super::super::spin(device, Duration::from_millis(3)).unwrap();
        end.record().unwrap();
        let seconds = end.seconds_since(&start).unwrap();
        assert!(seconds >= 0.003, "{device}: {seconds}");
    }

    #[test]
    fn a_flush_runs_again_and_again() {
        let mut flush = CacheFlush::new(Device::Cpu);
        flush.run().unwrap();
        flush.run().unwrap();
        assert_eq!(flush.buffer.len(), 64 << 20);
        assert!(flush.buffer.iter().step_by(4096).all(|&b| b == 2));
    }
}
