//! CUDA graphs, the analogue of `torch.cuda.CUDAGraph`: the work queued on the device's stream
//! between the start and the end of a *capture* is recorded instead of run, and the recording
//! replays later with one launch. Every kernel keeps the arguments it was recorded with (the same
//! buffers, the same sizes), which is why whoever records must keep those buffers alive and put
//! new data into them before a replay.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, sys};

use super::context::CudaDevice;
use super::error::CudaError;

/// A recorded stream of GPU work, ready to replay on the device's stream.
pub(crate) struct Recording {
    graph: CudaGraph,
}

// SAFETY: a CUDA graph may be used from any thread as long as calls on it are not concurrent;
// its owner keeps it behind a mutex, and it holds no thread-bound state.
unsafe impl Send for Recording {}

impl Recording {
    /// Records what `queue` puts on `device`'s stream. The work does not run: [`Recording::replay`]
    /// runs it. If `queue` fails, or the driver refuses something it queued (a synchronising call,
    /// a module load), the capture is ended and the error returned; nothing stays captured.
    pub(crate) fn record(
        device: &CudaDevice,
        queue: impl FnOnce() -> crate::Result<()>,
    ) -> Result<Recording, CudaError> {
        let stream = device.stream();
        // Thread-local mode: only this thread's unsafe calls (a synchronisation, a blocking
        // allocation) break the capture; other threads are free to use the GPU.
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        device.pool().set_recording(true);
        let queued = queue();
        device.pool().set_recording(false);
        let ended = stream.end_capture(CUgraphInstantiate_flags(0));
        queued.map_err(|e| CudaError::new(format!("while recording: {e}")))?;
        let graph = ended?.ok_or_else(|| CudaError::new("the capture recorded no work"))?;
        graph.upload()?;
        Ok(Recording { graph })
    }

    /// Queues the whole recording on the device's stream: one launch for every kernel in it.
    pub(crate) fn replay(&self) -> Result<(), CudaError> {
        Ok(self.graph.launch()?)
    }

    /// How many operations (kernels, copies) the recording holds, for logs.
    pub(crate) fn node_count(&self) -> usize {
        let mut count = 0usize;
        // SAFETY: a null node array asks only for the count; the graph is alive while `self` is.
        let status = unsafe { sys::cuGraphGetNodes(self.graph.cu_graph(), std::ptr::null_mut(), &mut count) };
        if status == sys::CUresult::CUDA_SUCCESS { count } else { 0 }
    }
}
