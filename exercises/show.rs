//! What the scratch examples (`exercises/*/examples/scratch.rs`) share: run one exercise and print
//! what it returns, or one short line when it panics, as a `todo!()` not written yet does, so
//! that the other exercises still run. Each scratch example includes this file with `#[path]`.

use std::fmt::Debug;
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

/// Runs `f`, the call of one exercise, and prints its result under `label`.
pub fn show<T: Debug>(label: &str, f: impl FnOnce() -> engine::Result<T>) {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => println!("{label}: {value:#?}\n"),
        Ok(Err(error)) => println!("{label}: returned an error: {error}\n"),
        Err(_) => println!("{label}: not done yet (it panicked: the line above says where)\n"),
    }
}
