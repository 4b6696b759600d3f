//! The CPU device's queue: the one kind of work on the CPU that outlasts the call that made it,
//! the busy time of [`crate::bench::spin`], a stand-in for a GPU kernel's run.
//!
//! Every CPU kernel finishes before its call returns. A GPU kernel does not: its launch returns at
//! once, and what waits for the device (reading values back, `synchronize`, a timing event) waits
//! for it. Timing code that forgets to wait is the classic mistake of GPU benchmarking (PyTorch's
//! `torch.cuda.synchronize()` before reading a clock). `spin` on the CPU queues its busy time here
//! as a launch queues a kernel, so that the same mistake shows on a CPU: the call returns at once,
//! and [`wait`] (called where a GPU would be waited for: [`crate::Tensor::to_vec`] and `item`,
//! `Device::Cpu.synchronize()`, recording a [`crate::bench::Stamp`]) sleeps until the queued time
//! has passed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When the queued busy time ends, if any is queued.
static BUSY_UNTIL: Mutex<Option<Instant>> = Mutex::new(None);

/// Queues `duration` of busy time after what is queued already, and returns at once.
pub(crate) fn busy_for(duration: Duration) {
    let mut until = BUSY_UNTIL.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    let start = until.filter(|&t| t > now).unwrap_or(now);
    *until = Some(start + duration);
}

/// Returns once every queued busy time has passed.
pub(crate) fn wait() {
    let until = *BUSY_UNTIL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(until) = until {
        let now = Instant::now();
        if until > now {
            std::thread::sleep(until - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_time_runs_after_the_call_and_is_waited_for() {
        let started = Instant::now();
        busy_for(Duration::from_millis(30));
        busy_for(Duration::from_millis(30));
        assert!(started.elapsed() < Duration::from_millis(30), "queueing returns at once");
        wait();
        assert!(started.elapsed() >= Duration::from_millis(60), "the two queued times run one after the other");
        let again = Instant::now();
        wait();
        assert!(again.elapsed() < Duration::from_millis(10), "nothing left to wait for");
    }
}
