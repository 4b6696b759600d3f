//! Graph breaks a learner causes on purpose: an explicit side effect ([`print!`](crate::print),
//! the analogue of Python's `print` inside a compiled function) and an opaque host function
//! ([`Tensor::map_host`], the analogue of calling NumPy or a C extension). `item()`, `to_vec()`
//! and printing a tensor's values break through the tracer when they need values it does not
//! have yet.

use std::fmt;

use crate::error::{Result, SourceLocation};
use crate::fx::proxy;
use crate::tensor::Tensor;

/// Prints to stdout like `std::print!`, but as a side effect a compiled function keeps: inside a
/// compiled function it is a graph break (the graph so far runs, the text prints, tracing goes on
/// in a new graph), as Python's `print` is for Dynamo. Tensors in the arguments print their
/// values. Returns `engine::Result<()>`: under `fullgraph(true)` the break is an error.
///
/// Guard it with [`dynamo::is_compiling`](crate::dynamo::is_compiling) to print only eagerly.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::dynamo::print_side_effect(::std::format_args!($($arg)*), false)
    };
}

/// [`print!`](crate::print) with a newline, like `std::println!`.
#[macro_export]
macro_rules! println {
    () => {
        $crate::dynamo::print_side_effect(::std::format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::dynamo::print_side_effect(::std::format_args!($($arg)*), true)
    };
}

/// What `engine::print!` and `engine::println!` expand to.
#[doc(hidden)]
#[track_caller]
pub fn print_side_effect(args: fmt::Arguments<'_>, newline: bool) -> Result<()> {
    let location = SourceLocation::caller();
    proxy::break_for_side_effect(
        "`engine::print!` is a side effect on the host, which a graph cannot contain",
        location,
    )?;
    let text = proxy::at_statement(location, || fmt::format(args));
    if newline {
        std::println!("{text}");
    } else {
        std::print!("{text}");
    }
    Ok(())
}

/// An explicit graph break, like `torch._dynamo.graph_break()`: inside a compiled function the
/// graph so far runs here and tracing goes on in a new graph; outside one it does nothing. Useful
/// to see (and measure) what a break does. Under `fullgraph(true)` it is an error.
#[track_caller]
pub fn graph_break() -> Result<()> {
    proxy::break_for_side_effect("`graph_break()` was called", SourceLocation::caller())
}

impl Tensor {
    /// Applies the Rust function `f` to every element, on the host, and names the result `name`.
    ///
    /// The tracer cannot look inside a Rust closure, so inside a compiled function this needs the
    /// tensor's values: a graph break (unless they are already known, as for an input). To keep
    /// such a function in the graph, register it as a custom op with a kernel
    /// ([`CustomOp`](crate::op::CustomOp)).
    #[track_caller]
    pub fn map_host(&self, name: &str, f: impl Fn(f32) -> f32) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let reason = format!("`map_host(\"{name}\")` runs a Rust function that the tracer cannot see into");
        let values = proxy::concretize(self, &reason, location)?.to_vec()?;
        Ok(Tensor::from_vec(values.into_iter().map(f).collect(), self.shape())?.with_name(name))
    }
}
