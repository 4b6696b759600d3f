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

use crate::compile_mode::Mode;
use crate::device::Device;
use crate::device::cuda::{CudaBuffer, CudaError, Recording};
use crate::error::{Error, Result};
use crate::inductor::call_plan::SlotId;
use crate::inductor::ir::{BufferName, LoweredGraph, NodeBody};
use crate::inductor::runtime::cuda::{CudaProgram, InputBuffer};
use crate::inductor::runtime::{Program, Slots, input_view};
use crate::logs::{self, Artifact};
use crate::profiler::{self, EventKind};
use crate::tensor::{self, Concrete, Storage, Tensor};

/// Why a GPU plan cannot be recorded as a CUDA graph; `None` when it can.
pub(crate) fn skip_reason(graph: &LoweredGraph) -> Option<String> {
    graph.nodes.iter().find(|n| matches!(n.body, NodeBody::Fallback { .. })).map(|node| {
        let at = node.location.map(|l| format!(" at {}", l.short())).unwrap_or_default();
        format!(
            "`{}`{at}, an op with no kernel that runs on the host and synchronises (the default plan runs)",
            node.op_name
        )
    })
}

/// Says, under a mode that records CUDA graphs, that a plan running on the CPU is not recorded.
pub(crate) fn log_host_skip(mode: Mode) {
    if mode.records_cuda_graphs() {
        log_skip("cpu device (a CUDA graph records GPU work; the default plan runs)");
    }
}

/// Logs the skip, once per compiled graph: the decision is made at compile time, never per call.
pub(crate) fn log_skip(reason: &str) {
    logs::log(Artifact::Cudagraphs, || format!("skipping cudagraphs due to {reason}"));
}

/// Recordings kept per program (per input shape) for calls whose caller still holds the outputs
/// of every earlier one; past this, such a call runs the default plan.
const MAX_RECORDINGS: usize = 4;

/// A program under reduce-overhead, the analogue of a node of `cudagraph_trees`: the first call
/// runs the plan as it is (warm-up: kernels load, cuBLAS sets up), the second records it as a
/// CUDA graph, and later calls replay a recording.
///
/// **Inputs.** An input whose tensor is the same in the warm-up and the recording call (a
/// captured weight, like a module parameter in PyTorch) is read in place, and the recording keeps
/// its memory alive. Any other input is copied into a static buffer before each replay. When an
/// input read in place later arrives as another tensor, the graph is recorded again with that
/// input copied (logged, with the count of recordings). An input the plan writes in place (a
/// parameter a whole training step updates) is always read in place, since a write into a copy
/// would be lost: when it arrives as another tensor, the graph is recorded again on that one.
///
/// **Outputs.** A replay writes into the recording's own buffers, and the returned tensors share
/// them: nothing is copied. PyTorch lets the next replay overwrite them (reading one afterwards
/// raises an error). Here a recording is never replayed while the caller still holds one of its
/// outputs: the call replays another recording whose outputs were dropped, or records one more
/// (at most [`MAX_RECORDINGS`]; past that the call runs the default plan, said once). An output is
/// therefore never overwritten while it can be read; a loop that drops its outputs before the next
/// call, as most do, keeps replaying one recording.
pub(crate) struct Graphed {
    program: CudaProgram,
    state: Mutex<State>,
}

enum State {
    /// No call yet.
    Cold,
    /// Warmed up; the storages of the warm-up call's inputs, by address.
    Warm { seen: Vec<usize> },
    /// Recorded: replay one of these.
    Recorded { replays: Vec<Replay>, said_full: bool },
    /// Recording failed (said once): the default plan runs from now on.
    Failed,
}

/// A recording and the memory it reads and writes.
struct Replay {
    recording: Recording,
    inputs: Vec<StaticInput>,
    /// Which inputs are copied into static buffers (the rest are read in place).
    copied: Vec<bool>,
    /// The slots the plan does not return, allocated once. (Kept: the recording writes them.)
    _scratch: Slots<CudaBuffer>,
    /// The returned slots' memory, shared with the tensors handed out.
    outputs: Vec<(SlotId, Arc<Storage>)>,
}

impl Replay {
    /// Whether no tensor handed out from this recording is still alive.
    fn free(&self) -> bool {
        self.outputs.iter().all(|(_, storage)| Arc::strong_count(storage) == 1)
    }
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
}

impl Program for Graphed {
    /// Runs the plan (warm-up), records it, or replays a recording.
    fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let concrete = self.program.check(inputs)?;
        let (replays, said_full) = match &mut *state {
            State::Cold => {
                *state = State::Warm { seen: concrete.iter().map(|c| address(&c.storage)).collect() };
                return self.program.run(inputs);
            }
            State::Failed => return self.program.run(inputs),
            State::Warm { seen } => {
                let copied = self.copied(concrete.iter().zip(seen.iter()).map(|(c, &s)| address(&c.storage) != s));
                let mut replays = Vec::new();
                let outputs = self.record(&mut replays, &concrete, copied, inputs, "first recording")?;
                *state = match replays.is_empty() {
                    true => State::Failed,
                    false => State::Recorded { replays, said_full: false },
                };
                return Ok(outputs);
            }
            State::Recorded { replays, said_full } => (replays, said_full),
        };
        let Some(replay) = replays.iter_mut().find(|r| r.free()) else {
            if replays.len() < MAX_RECORDINGS {
                let copied = replays[0].copied.clone();
                let why = "the outputs of every earlier recording are still held";
                return self.record(replays, &concrete, copied, inputs, why);
            }
            if !std::mem::replace(said_full, true) {
                log_skip(&format!(
                    "live outputs: the caller holds outputs of all {MAX_RECORDINGS} recordings, so calls run the \
                     default plan until some are dropped"
                ));
            }
            return self.program.run(inputs);
        };
        let mut fits = true;
        for (input, c) in replay.inputs.iter_mut().zip(&concrete) {
            fits &= input.refresh(c).map_err(|e| failed("copying an input for the replay", e))?;
        }
        if !fits {
            // An input read in place arrived as another tensor: from now on it is copied.
            let copied = self.copied(replay.inputs.iter().zip(&concrete).map(|(s, c)| match s {
                StaticInput::InPlace { storage, .. } => !Arc::ptr_eq(storage, &c.storage),
                StaticInput::Copied { .. } => true,
            }));
            replays.clear();
            let outputs = self.record(replays, &concrete, copied, inputs, "an input read in place changed")?;
            if replays.is_empty() {
                *state = State::Failed;
            }
            return Ok(outputs);
        }
        let ordinal = self.program.device().ordinal();
        let _launch = profiler::launch("cuda_graph_replay", EventKind::Compiled, Device::Cuda(ordinal), Vec::new);
        replay.recording.replay().map_err(|e| failed("replaying the CUDA graph", e))?;
        // A replay writes tensors' memory: the inputs updated in place, and the output storages
        // it hands out again.
        tensor::wrote();
        Ok(self.outputs(&concrete, replay))
    }
}

impl Graphed {
    /// Which inputs a recording copies into static buffers, from whether each `changed` between
    /// calls: the changing ones, except those the plan writes in place.
    fn copied(&self, changed: impl Iterator<Item = bool>) -> Vec<bool> {
        let written = self.program.written_inputs();
        changed.enumerate().map(|(i, changed)| changed && !written.contains(&i)).collect()
    }

    /// Records the plan with the inputs marked `copied` in static buffers, replays it once for
    /// this call and adds it to `replays`; on failure says why once and runs the default plan
    /// (leaving `replays` as it was).
    fn record(
        &self,
        replays: &mut Vec<Replay>,
        concrete: &[&Concrete],
        copied: Vec<bool>,
        inputs: &[Tensor],
        why: &str,
    ) -> Result<Vec<Tensor>> {
        let replay = match self.try_record(concrete, copied) {
            Ok(replay) => replay,
            Err(e) => {
                log_skip(&format!("a failed capture ({e})"));
                return self.program.run(inputs);
            }
        };
        let n = RECORDINGS.fetch_add(1, Ordering::Relaxed) + 1;
        logs::log(Artifact::Cudagraphs, || {
            let shapes: Vec<String> = inputs.iter().map(|t| format!("{:?}", t.shape())).collect();
            let copies: Vec<String> =
                replay.copied.iter().enumerate().filter(|(_, c)| **c).map(|(i, _)| i.to_string()).collect();
            format!(
                "recorded CUDA graph {n} ({} operations; {why}) for inputs {}; inputs copied into static buffers \
                 before each replay: [{}], the others read in place",
                replay.recording.node_count(),
                shapes.join(", "),
                copies.join(", ")
            )
        });
        let ordinal = self.program.device().ordinal();
        let _launch = profiler::launch("cuda_graph_replay", EventKind::Compiled, Device::Cuda(ordinal), Vec::new);
        replay.recording.replay().map_err(|e| failed("replaying the CUDA graph", e))?;
        // A replay writes tensors' memory: the inputs updated in place, and the output storages
        // it hands out again.
        tensor::wrote();
        let outputs = self.outputs(concrete, &replay);
        replays.push(replay);
        Ok(outputs)
    }

    fn try_record(&self, concrete: &[&Concrete], copied: Vec<bool>) -> Result<Replay> {
        let device = self.program.device();
        let mut slots = self.program.static_slots()?;
        let mut statics = Vec::with_capacity(concrete.len());
        for (c, &copy) in concrete.iter().zip(&copied) {
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
        // Nothing kept is lent: every step is recorded, since a replay consults no kept entry.
        let recording = Recording::record(device, || self.program.queue(concrete, &buffers, &mut slots, None))
            .map_err(|e| failed("recording", e))?;
        drop(buffers);
        // The returned slots become storages the outputs share; the recording keeps them alive.
        let mut outputs: Vec<(SlotId, Arc<Storage>)> = Vec::new();
        for view in self.program.output_views() {
            let BufferName::Node(n) = view.buffer else { continue };
            let slot = self.program.slot_of()[n].expect("returned buffers have a slot");
            if !outputs.iter().any(|(s, _)| *s == slot) {
                let buffer = slots[slot].take().expect("static slots are all allocated");
                outputs.push((slot, Arc::new(Storage::Cuda(buffer))));
            }
        }
        Ok(Replay { recording, inputs: statics, copied, _scratch: slots, outputs })
    }

    /// The tensors a replay of `replay` returns: views of the caller's inputs, or of the
    /// recording's output storages.
    fn outputs(&self, concrete: &[&Concrete], replay: &Replay) -> Vec<Tensor> {
        let slot_of = self.program.slot_of();
        self.program
            .output_views()
            .iter()
            .map(|view| match view.buffer {
                BufferName::Input(i) => input_view(concrete[i], view),
                BufferName::Node(n) => {
                    let slot = slot_of[n].expect("returned buffers have a slot");
                    let (_, storage) = replay.outputs.iter().find(|(s, _)| *s == slot).expect("taken when recorded");
                    Tensor::from_concrete(storage.clone(), view.layout.clone())
                }
            })
            .collect()
    }
}
