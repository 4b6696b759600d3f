//! What the scratch examples (`exercises/phaseN-*/examples/phaseN-scratch.rs`) share: run one exercise and print
//! what it returns, or one short line when it panics, as a `todo!()` not written yet does, so
//! that the other exercises still run. Each scratch example includes this file with `#[path]`.

use std::fmt::{Debug, Display};
use std::panic::{self, AssertUnwindSafe};

/// Prints each panic as one line with its place (`panicked at src/cse.rs:17: not yet
/// implemented`) instead of a message and a backtrace hint.
pub fn quiet_panics() {
    panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let payload = info.payload();
        let message = payload.downcast_ref::<&str>().copied().or(payload.downcast_ref::<String>().map(String::as_str));
        eprintln!("  panicked{at}: {}", message.unwrap_or("a panic"));
    }));
}

/// Runs `f`, the call of one exercise, and prints its result under `label` as `{:#?}` shows it.
pub fn show<T: Debug>(label: &str, f: impl FnOnce() -> engine::Result<T>) {
    report(label, f, |value| format!(": {value:#?}"));
}

/// Runs `f` and prints the text it returns (a printed graph, a kernel's code) under `label` as it
/// is, rather than quoted and escaped: on the label's line if it is one line, else below it.
#[allow(dead_code, reason = "the scratch examples whose exercises return no text do not call it")]
pub fn show_text<T: Display>(label: &str, f: impl FnOnce() -> engine::Result<T>) {
    report(label, f, |text| {
        let text = text.to_string();
        if text.contains('\n') { format!(":\n{text}") } else { format!(": {text}") }
    });
}

/// Runs `f` and prints `label`, then what `render` makes of the result (from its colon on), or
/// the error, or that it panicked.
fn report<T>(label: &str, f: impl FnOnce() -> engine::Result<T>, render: impl FnOnce(&T) -> String) {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => println!("{label}{}\n", render(&value)),
        Ok(Err(error)) => println!("{label}: returned an error: {error}\n"),
        Err(_) => println!("{label}: not done yet (it panicked: the line above says where)\n"),
    }
}
