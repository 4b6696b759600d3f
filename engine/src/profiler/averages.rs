//! `key_averages()`: a profile's events grouped by name (and optionally input shape), with call
//! counts and time totals, printed as a table in the spirit of
//! `prof.key_averages().table(sort_by="cuda_time_total")`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use tabled::builder::Builder;
use tabled::settings::Style;

use super::record::{Event, EventKind};

/// One group of events: same name, kind and (when grouped by shape) input shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct AverageRow {
    /// The op, kernel or range name.
    pub name: String,
    /// What the events are.
    pub kind: EventKind,
    /// The input shapes, when grouped by them.
    pub shapes: Option<Vec<Vec<usize>>>,
    /// How many events.
    pub calls: usize,
    /// Host time inside the events, nested spans excluded.
    pub self_host_total: Duration,
    /// Host time inside the events, nested spans included.
    pub host_total: Duration,
    /// GPU time of the events' kernels (for a range, of the kernels nested in it); zero on
    /// the CPU.
    pub device_total: Duration,
    /// GPU time of the events' own kernels (zero for a range, whose kernels have rows of their
    /// own).
    pub self_device_total: Duration,
}

impl AverageRow {
    /// Self host time per call.
    pub fn self_host_average(&self) -> Duration {
        self.self_host_total / self.calls as u32
    }

    /// Host time per call.
    pub fn host_average(&self) -> Duration {
        self.host_total / self.calls as u32
    }

    /// Device time per call.
    pub fn device_average(&self) -> Duration {
        self.device_total / self.calls as u32
    }
}

/// What events are grouped by: name, kind and (optionally) input shapes.
type Key = (String, EventKind, Option<Vec<Vec<usize>>>);

/// The time column to sort a [`KeyAverages`] table by, largest first (`sort_by=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// `self_cpu_time_total`.
    SelfHostTotal,
    /// Self host time per call.
    SelfHostAverage,
    /// `cpu_time_total`.
    HostTotal,
    /// Host time per call.
    HostAverage,
    /// `cuda_time_total`.
    DeviceTotal,
    /// `self_cuda_time_total`.
    SelfDeviceTotal,
    /// Device time per call.
    DeviceAverage,
    /// `count`.
    Calls,
}

/// Events grouped by key, with totals: a [`Profile`](super::Profile)'s `key_averages()`.
/// `Display` prints the table.
#[derive(Clone, Debug)]
pub struct KeyAverages {
    rows: Vec<AverageRow>,
}

impl KeyAverages {
    /// Groups `events` by name and kind, and by input shapes with `by_shape`.
    pub(super) fn new(events: &[Event], by_shape: bool) -> KeyAverages {
        let mut device_total = vec![Duration::ZERO; events.len()];
        // Children come after their parents, so walking backwards adds each total to its parent
        // after it is complete: a range's device time is its kernels'.
        for (i, event) in events.iter().enumerate().rev() {
            device_total[i] += event.device_span.map_or(Duration::ZERO, |(_, d)| d);
            if let Some(parent) = event.parent {
                device_total[parent] = device_total[parent] + device_total[i];
            }
        }
        let mut groups: BTreeMap<Key, AverageRow> = BTreeMap::new();
        for (event, device) in events.iter().zip(device_total) {
            let shapes = if by_shape { event.shapes.clone() } else { None };
            let key = (event.name.clone(), event.kind, shapes.clone());
            let row = groups.entry(key).or_insert_with(|| AverageRow {
                name: event.name.clone(),
                kind: event.kind,
                shapes,
                calls: 0,
                self_host_total: Duration::ZERO,
                host_total: Duration::ZERO,
                device_total: Duration::ZERO,
                self_device_total: Duration::ZERO,
            });
            row.calls += 1;
            row.self_host_total += event.self_host_time;
            row.host_total += event.host_time;
            row.device_total += device;
            row.self_device_total += event.device_span.map_or(Duration::ZERO, |(_, d)| d);
        }
        let table = KeyAverages { rows: groups.into_values().collect() };
        let by = if table.has_device_times() { SortBy::DeviceTotal } else { SortBy::SelfHostTotal };
        table.sort_by(by)
    }

    /// The rows sorted by `column`, largest first (ties by name, then kind, so that the order is
    /// the same on every run).
    pub fn sort_by(mut self, column: SortBy) -> KeyAverages {
        let key = |r: &AverageRow| -> (Duration, usize) {
            match column {
                SortBy::SelfHostTotal => (r.self_host_total, 0),
                SortBy::SelfHostAverage => (r.self_host_average(), 0),
                SortBy::HostTotal => (r.host_total, 0),
                SortBy::HostAverage => (r.host_average(), 0),
                SortBy::DeviceTotal => (r.device_total, 0),
                SortBy::SelfDeviceTotal => (r.self_device_total, 0),
                SortBy::DeviceAverage => (r.device_average(), 0),
                SortBy::Calls => (Duration::ZERO, r.calls),
            }
        };
        self.rows.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| (&a.name, a.kind).cmp(&(&b.name, b.kind))));
        self
    }

    /// The rows in their current order.
    pub fn rows(&self) -> &[AverageRow] {
        &self.rows
    }

    /// The first row named `name` (any kind, any shape).
    pub fn row(&self, name: &str) -> Option<&AverageRow> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// Whether any event ran on a GPU (otherwise the device columns are left out).
    fn has_device_times(&self) -> bool {
        self.rows.iter().any(|r| r.device_total > Duration::ZERO)
    }
}

impl fmt::Display for KeyAverages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = self.has_device_times();
        let shapes = self.rows.iter().any(|r| r.shapes.is_some());
        // Shares are of the kernels' time: a range's self time is mostly the launches' gaps.
        let share_base = |total: fn(&AverageRow) -> Duration| -> f64 {
            self.rows.iter().filter(|r| r.kind != EventKind::Range).map(|r| total(r).as_secs_f64()).sum()
        };
        let (host_base, device_base) = (share_base(|r| r.self_host_total), share_base(|r| r.self_device_total));
        let mut header = vec!["name", "kind"];
        if shapes {
            header.push("input shapes");
        }
        header.extend(["calls", "self host", "self host avg", "self host %", "host total", "host avg"]);
        if device {
            header.extend(["device total", "self device %", "device avg"]);
        }
        let mut builder = Builder::default();
        builder.push_record(header);
        for r in &self.rows {
            let mut cells = vec![r.name.clone(), r.kind.label().to_string()];
            if shapes {
                cells.push(r.shapes.as_ref().map_or(String::new(), |s| format!("{s:?}")));
            }
            let kernel = r.kind != EventKind::Range;
            cells.extend([
                r.calls.to_string(),
                time(r.self_host_total),
                time(r.self_host_average()),
                if kernel { share(r.self_host_total, host_base) } else { String::new() },
                time(r.host_total),
                time(r.host_average()),
            ]);
            if device {
                cells.extend([
                    time(r.device_total),
                    if kernel { share(r.self_device_total, device_base) } else { String::new() },
                    time(r.device_average()),
                ]);
            }
            builder.push_record(cells);
        }
        write!(f, "{}", builder.build().with(Style::psql()))
    }
}

/// A duration in the unit that keeps it readable (`12.3us`, `4.56ms`, `1.23s`).
fn time(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2}s")
    } else if s >= 1e-3 {
        format!("{:.2}ms", s * 1e3)
    } else {
        format!("{:.1}us", s * 1e6)
    }
}

fn share(part: Duration, whole: f64) -> String {
    if whole > 0.0 { format!("{:.1}%", 100.0 * part.as_secs_f64() / whole) } else { String::new() }
}
