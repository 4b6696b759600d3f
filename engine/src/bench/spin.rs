//! Work of a known duration, to test timers against: a timer that does not wait for the device
//! (on a GPU, kernels run after the launching call has returned) measures less than it.

use std::time::Duration;

use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::device::Device;
use crate::device::cuda::{CudaDevice, CudaError};
use crate::error::{Result, SourceLocation};

/// One thread reading the GPU's global nanosecond timer until `nanoseconds` have passed.
const SPIN_SOURCE: &str = r#"
extern "C" __global__ void spin(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
"#;

/// Keeps `device` busy for at least `duration`, and returns at once: on a GPU it queues a kernel
/// that spins that long; on the CPU it queues that much busy time on the CPU's queue
/// (`device::cpu::queue`), which what waits for the device (reading values, `synchronize`, a
/// [`super::Stamp`]) waits for. So a timer that does not wait for the device measures less than
/// the work on either.
#[track_caller]
pub fn spin(device: Device, duration: Duration) -> Result<()> {
    let location = SourceLocation::caller();
    let Device::Cuda(ordinal) = device else {
        crate::device::cpu::queue::busy_for(duration);
        return Ok(());
    };
    let gpu = CudaDevice::get(ordinal)?;
    let function = gpu.load(SPIN_SOURCE)?.function("spin")?;
    let nanoseconds = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(&nanoseconds);
    let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: the kernel takes one u64 and touches no memory.
    unsafe { launch.launch(config) }.map_err(|e| CudaError::from(e).at("spin", device, Vec::new(), location))?;
    Ok(())
}
