//! Reduce-overhead, the analogue of `torch._inductor.cudagraph_trees`: a compiled plan recorded
//! as a CUDA graph (see [`crate::device::cuda`]'s `graph`) and replayed, one launch per call.
//!
//! Whether a plan can be recorded is decided at compile time ([`skip_reason`], PyTorch's
//! `check_for_skip`); each reason is said once, under `ENGINE_LOGS=cudagraphs`, in PyTorch's
//! words ("skipping cudagraphs due to ..."). A dynamic graph records one CUDA graph per binding of
//! its sizes (each binding has its own program), and each graph of a function with graph breaks
//! records its own: the host work between them runs as it does in the default mode.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::cuda::{CudaProgram, InputBuffer};
use super::{Slots, outputs};
use crate::device::Device;
use crate::device::cuda::{CudaBuffer, CudaError, Recording};
use crate::error::{Error, Result};
use crate::inductor::ir::{BufferName, LoweredGraph, NodeBody};
use crate::logs::{self, Artifact};
use crate::tensor::{Concrete, Storage, Tensor};

/// Why a plan on `device` cannot be recorded as a CUDA graph; `None` when it can.
pub(crate) fn skip_reason(device: Device, graph: &LoweredGraph) -> Option<String> {
    if device == Device::Cpu {
        return Some("cpu device (a CUDA graph records GPU work; the default plan runs)".into());
    }
    graph.nodes.iter().find(|n| matches!(n.body, NodeBody::Fallback { .. })).map(|node| {
        let at = node.location.map(|l| format!(" at {}", l.short())).unwrap_or_default();
        format!(
            "`{}`{at}, an op with no kernel that runs on the host and synchronises (the default plan runs)",
            node.op_name
        )
    })
}

/// Logs the skip, once per compiled graph: the decision is made at compile time, never per call.
pub(crate) fn log_skip(reason: &str) {
    logs::log(Artifact::Cudagraphs, || format!("skipping cudagraphs due to {reason}"));
}

/// A program under reduce-overhead, the analogue of a node of `cudagraph_trees`: the first call
/// runs the plan as it is (warm-up: kernels load, cuBLAS sets up), the second records it as a
/// CUDA graph, and every later call replays the recording.
///
/// **Inputs.** An input whose tensor is the same in the warm-up and the recording call (a
/// captured weight, like a module parameter in PyTorch) is read in place, and the recording keeps
/// its memory alive. Any other input is copied into a static buffer before each replay. When an
/// input read in place later arrives as another tensor, the graph is recorded again with that
/// input copied (logged); the count of recordings is in the log.
///
/// **Outputs.** PyTorch hands back the recording's own output buffers, which the next replay
/// overwrites. Here each replay copies its outputs into fresh tensors (one device-to-device copy
/// per output, queued after the replay), so an output stays valid however many calls follow.
pub(crate) struct Graphed {
    program: CudaProgram,
    state: Mutex<State>,
}

enum State {
    /// No call yet.
    Cold,
    /// Warmed up; the storages of the warm-up call's inputs, by address.
    Warm { seen: Vec<usize> },
    /// Recorded: replay.
    Recorded(Box<Replay>),
    /// Recording failed (said once): the default plan runs from now on.
    Failed,
}

/// A recording and the memory it reads and writes.
struct Replay {
    recording: Recording,
    inputs: Vec<StaticInput>,
    /// Every slot of the plan, allocated once.
    slots: Slots<CudaBuffer>,
}

/// Where a recording reads one graph input.
enum StaticInput {
    /// Where the caller's tensor lives (kept alive by this reference).
    InPlace { storage: Arc<Storage>, offset: usize },
    /// A static buffer the caller's storage is copied into before each replay.
    Copied { buffer: CudaBuffer, offset: usize },
}

impl StaticInput {
    fn buffer(&self) -> InputBuffer<'_> {
        match self {
            StaticInput::InPlace { storage, offset } => {
                let Storage::Cuda(buffer) = &**storage else { unreachable!("recorded inputs are on the GPU") };
                InputBuffer { buffer, offset: *offset }
            }
            StaticInput::Copied { buffer, offset } => InputBuffer { buffer, offset: *offset },
        }
    }

    /// Makes the static input hold `input`; false when it cannot (another tensor where one was
    /// read in place, or a copy of another length), which calls for a new recording.
    fn refresh(&mut self, input: &Concrete) -> std::result::Result<bool, CudaError> {
        match self {
            StaticInput::InPlace { storage, offset } => {
                Ok(Arc::ptr_eq(storage, &input.storage) && *offset == input.layout.offset())
            }
            StaticInput::Copied { buffer, offset } => {
                let Storage::Cuda(source) = &*input.storage else { unreachable!("inputs were checked on the GPU") };
                if source.len() != buffer.len() || *offset != input.layout.offset() {
                    return Ok(false);
                }
                buffer.copy_from(source)?;
                Ok(true)
            }
        }
    }
}

/// Recordings made in this process, for the log.
static RECORDINGS: AtomicUsize = AtomicUsize::new(0);

fn failed(what: &str, e: CudaError) -> Error {
    Error::Backend { backend: "inductor".into(), message: format!("{what}: {e}") }
}

fn address(storage: &Arc<Storage>) -> usize {
    Arc::as_ptr(storage) as usize
}

impl Graphed {
    /// `program` under reduce-overhead; nothing is recorded before its second call.
    pub(crate) fn new(program: CudaProgram) -> Graphed {
        Graphed { program, state: Mutex::new(State::Cold) }
    }

    /// Runs the plan (warm-up), records it, or replays the recording.
    pub(crate) fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let concrete = self.program.check(inputs)?;
        match &mut *state {
            State::Cold => {
                *state = State::Warm { seen: concrete.iter().map(|c| address(&c.storage)).collect() };
                self.program.run(inputs)
            }
            State::Failed => self.program.run(inputs),
            State::Warm { seen } => {
                let copied = concrete.iter().zip(seen.iter()).map(|(c, &s)| address(&c.storage) != s).collect();
                self.record(&mut state, &concrete, copied, inputs)
            }
            State::Recorded(replay) => {
                let mut fits = true;
                for (input, c) in replay.inputs.iter_mut().zip(&concrete) {
                    fits &= input.refresh(c).map_err(|e| failed("copying an input for the replay", e))?;
                }
                if !fits {
                    let copied: Vec<bool> = replay
                        .inputs
                        .iter()
                        .zip(&concrete)
                        .map(|(s, c)| match s {
                            StaticInput::InPlace { storage, .. } => !Arc::ptr_eq(storage, &c.storage),
                            StaticInput::Copied { .. } => true,
                        })
                        .collect();
                    return self.record(&mut state, &concrete, copied, inputs);
                }
                replay.recording.replay().map_err(|e| failed("replaying the CUDA graph", e))?;
                self.copy_outputs(&concrete, &replay.slots)
            }
        }
    }

    /// Records the plan with the inputs marked `copied` in static buffers, replays it once for
    /// this call, and keeps it; on failure says why once and runs the default plan from now on.
    fn record(
        &self,
        state: &mut State,
        concrete: &[&Concrete],
        copied: Vec<bool>,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>> {
        match self.try_record(concrete, &copied) {
            Ok(replay) => {
                let n = RECORDINGS.fetch_add(1, Ordering::Relaxed) + 1;
                logs::log(Artifact::Cudagraphs, || {
                    let shapes: Vec<String> = inputs.iter().map(|t| format!("{:?}", t.shape())).collect();
                    let copies: Vec<String> =
                        copied.iter().enumerate().filter(|(_, c)| **c).map(|(i, _)| i.to_string()).collect();
                    format!(
                        "recorded CUDA graph {n} ({} operations) for inputs {}; inputs copied into static buffers \
                         before each replay: [{}], the others read in place",
                        replay.recording.node_count(),
                        shapes.join(", "),
                        copies.join(", ")
                    )
                });
                replay.recording.replay().map_err(|e| failed("replaying the CUDA graph", e))?;
                let outputs = self.copy_outputs(concrete, &replay.slots);
                *state = State::Recorded(Box::new(replay));
                outputs
            }
            Err(e) => {
                log_skip(&format!("a failed capture ({e})"));
                *state = State::Failed;
                self.program.run(inputs)
            }
        }
    }

    fn try_record(&self, concrete: &[&Concrete], copied: &[bool]) -> Result<Replay> {
        let device = self.program.device();
        let mut slots = self.program.static_slots()?;
        let mut statics = Vec::with_capacity(concrete.len());
        for (c, &copy) in concrete.iter().zip(copied) {
            statics.push(if copy {
                let Storage::Cuda(source) = &*c.storage else { unreachable!("inputs were checked on the GPU") };
                let mut buffer = CudaBuffer::alloc(device, source.len()).map_err(|e| failed("a static input", e))?;
                buffer.copy_from(source).map_err(|e| failed("a static input", e))?;
                StaticInput::Copied { buffer, offset: c.layout.offset() }
            } else {
                StaticInput::InPlace { storage: c.storage.clone(), offset: c.layout.offset() }
            });
        }
        let buffers: Vec<InputBuffer> = statics.iter().map(StaticInput::buffer).collect();
        let recording = Recording::record(device, || self.program.queue(concrete, &buffers, &mut slots))
            .map_err(|e| failed("recording", e))?;
        Ok(Replay { recording, inputs: statics, slots })
    }

    /// The outputs of a replay as fresh tensors: each returned slot copied out of the recording's
    /// memory, so that the next replay cannot overwrite what the caller holds.
    fn copy_outputs(&self, concrete: &[&Concrete], slots: &Slots<CudaBuffer>) -> Result<Vec<Tensor>> {
        let slot_of = self.program.slot_of();
        let mut fresh: Slots<CudaBuffer> = Slots::new(slots.len());
        for view in self.program.output_views() {
            let BufferName::Node(n) = view.buffer else { continue };
            let slot = slot_of[n].expect("returned buffers have a slot");
            if fresh[slot].is_none() {
                let source = slots[slot].as_ref().expect("static slots are all allocated");
                let mut copy = CudaBuffer::alloc(self.program.device(), source.len())
                    .map_err(|e| failed("copying an output", e))?;
                copy.copy_from(source).map_err(|e| failed("copying an output", e))?;
                fresh[slot] = Some(copy);
            }
        }
        Ok(outputs(self.program.output_views(), concrete, slot_of, &mut fresh, Storage::Cuda))
    }
}
