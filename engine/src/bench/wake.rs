//! Raising a GPU's clock before timing it. An idle GPU drops its streaming multiprocessors' clock
//! to a fraction of its highest and raises it only once work arrives, so the first samples of a
//! benchmark on an idle GPU run slow (`bench/NOTES-lab.md` has the H100's figures). Benchmark harnesses warm up for this;
//! [`wake`] measures the clock instead, so that a GPU already busy (a shared lab machine) is not
//! kept waiting for a fixed time, and an idle one is kept busy only until its clock has risen.
//! PyTorch has no such part: `triton.testing.do_bench`'s warm-up calls are its nearest kin.

use std::time::{Duration, Instant};

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::device::Device;
use crate::device::cuda::{CudaDevice, CudaError};
use crate::error::{Result, SourceLocation};

/// One thread spinning on the GPU's nanosecond timer for `nanoseconds`, counting its
/// multiprocessor's clock cycles meanwhile: cycles per nanosecond, times 1000, is the clock in MHz.
const CLOCK_SOURCE: &str = r#"
extern "C" __global__ void sm_clock_mhz(unsigned long long nanoseconds, double* mhz) {
    unsigned long long start, now;
    long long first = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
    long long last = clock64();
    *mhz = (double)(last - first) * 1e3 / (double)(now - start);
}
"#;

/// How long each measurement of the clock keeps the GPU busy.
const PROBE: Duration = Duration::from_millis(2);

/// The clock counts as raised at this fraction of the device's highest clock.
const RAISED: f64 = 0.9;

/// What [`wake`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wake {
    /// The multiprocessors' clock at the last measurement, in MHz.
    pub mhz: f64,
    /// The device's highest clock in MHz, when the driver reports it.
    pub max_mhz: Option<f64>,
    /// How long the GPU was kept busy.
    pub took: Duration,
}

impl Wake {
    /// Whether the clock reached 90% of the device's highest (never, where the driver does not
    /// report the highest).
    pub fn raised(&self) -> bool {
        self.max_mhz.is_some_and(|max| self.mhz >= RAISED * max)
    }
}

/// Keeps `device` busy, measuring its clock every 2 ms, until the clock is within 90% of the
/// device's highest or `limit` has passed, and waits for it: at once where the GPU was busy a
/// moment ago. `None` on the CPU, which has nothing to wake.
#[track_caller]
pub fn wake(device: Device, limit: Duration) -> Result<Option<Wake>> {
    let location = SourceLocation::caller();
    let Device::Cuda(ordinal) = device else { return Ok(None) };
    let gpu = CudaDevice::get(ordinal)?;
    let function = gpu.load(CLOCK_SOURCE)?.function("sm_clock_mhz")?;
    let failed = |e| CudaError::from(e).at("sm_clock_mhz", device, Vec::new(), location);
    let mut mhz = gpu.stream().alloc_zeros::<f64>(1).map_err(failed)?;
    let max_mhz = gpu.facts().max_sm_clock_mhz.map(f64::from);
    let nanoseconds = u64::try_from(PROBE.as_nanos()).unwrap_or(u64::MAX);
    let started = Instant::now();
    loop {
        let mut launch = gpu.stream().launch_builder(&function);
        launch.arg(&nanoseconds).arg(&mut mhz);
        let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel takes a u64 and writes one f64 into `mhz`, a buffer of one f64.
        unsafe { launch.launch(config) }.map_err(failed)?;
        let measured = gpu.stream().clone_dtoh(&mhz).map_err(failed)?[0];
        let wake = Wake { mhz: measured, max_mhz, took: started.elapsed() };
        if wake.raised() || wake.took >= limit {
            return Ok(Some(wake));
        }
    }
}
