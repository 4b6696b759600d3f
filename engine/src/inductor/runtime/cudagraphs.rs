//! Reduce-overhead's decision, the analogue of `torch._inductor.cudagraph_utils.check_for_skip`:
//! whether a compiled plan can be recorded as a CUDA graph, and if not, why. Each reason is said
//! once, when the graph is compiled, under `ENGINE_LOGS=cudagraphs`, in PyTorch's words
//! ("skipping cudagraphs due to ...").

use crate::device::Device;
use crate::inductor::ir::{LoweredGraph, NodeBody};
use crate::logs::{self, Artifact};

/// Why a plan on `device` cannot be recorded as a CUDA graph; `None` when it can.
pub(crate) fn skip_reason(device: Device, dynamic: bool, graph: &LoweredGraph) -> Option<String> {
    if device == Device::Cpu {
        return Some("cpu device (a CUDA graph records GPU work; the default plan runs)".into());
    }
    if dynamic {
        return Some("dynamic shapes (a recording fixes every size; the default plan runs)".into());
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
