//! Chrome Trace Event JSON, the format `prof.export_chrome_trace` writes and Perfetto and
//! `chrome://tracing` read: one complete event (`"ph": "X"`, start and duration in
//! microseconds) per span. Host spans go on the host track (process 0), where ranges enclose
//! their launches; each GPU's kernels, timed by CUDA events, go on that GPU's track (process
//! 1 + ordinal), so the gap between queueing a kernel and running it is visible.

use serde_json::{Value, json};

use super::record::Event;
use crate::device::Device;

/// The trace of `events` as a JSON document.
pub(super) fn chrome_trace(events: &[Event]) -> String {
    let micros = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    let mut trace: Vec<Value> = vec![process_name(0, "host")];
    let mut gpus: Vec<usize> = Vec::new();
    for event in events {
        let mut args = json!({ "kind": event.kind.label() });
        if let Some(device) = event.device {
            args["device"] = json!(device.to_string());
        }
        if let Some(shapes) = &event.shapes {
            args["input shapes"] = json!(shapes);
        }
        trace.push(json!({
            "name": event.name, "cat": event.kind.label(), "ph": "X", "pid": 0, "tid": 0,
            "ts": micros(event.host_start), "dur": micros(event.host_time), "args": args,
        }));
        if let (Some(Device::Cuda(ordinal)), Some((start, duration))) = (event.device, event.device_span) {
            if !gpus.contains(&ordinal) {
                gpus.push(ordinal);
                trace.push(process_name(1 + ordinal, &format!("cuda:{ordinal}")));
            }
            trace.push(json!({
                "name": event.name, "cat": "kernel", "ph": "X", "pid": 1 + ordinal, "tid": 0,
                "ts": micros(start), "dur": micros(duration), "args": args,
            }));
        }
    }
    json!({ "traceEvents": trace, "displayTimeUnit": "ms" }).to_string()
}

/// The metadata event that names a track.
fn process_name(pid: usize, name: &str) -> Value {
    json!({ "name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": { "name": name } })
}
