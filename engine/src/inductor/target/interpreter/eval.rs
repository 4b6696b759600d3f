//! Running one kernel of parsed kernel IR over host buffers, a chunk of `x` at a time: each
//! statement computes a column of values, one per `x` of the chunk (per row in a reduction), so
//! the interpreter's own work is done once per statement, not once per element.

use std::ops::Range;

use crate::device::cpu::{Elements, ElementsMut, vecmath};
use crate::dtype::DType;
use crate::inductor::ir::PointwiseOp;
use crate::inductor::kernel::{Combine, Phase, Stmt, Value};
use crate::inductor::runtime::host::HostKernel;
use crate::op::{BinaryVisitor, UnaryVisitor};

/// Values of `x` evaluated together.
const CHUNK: usize = 1024;

/// A kernel read back from its kernel IR, ready to interpret.
#[derive(Clone, Debug)]
pub(super) struct Interpreted {
    /// Its name in the module.
    pub name: String,
    /// For each argument, whether the kernel writes it.
    pub written: Vec<bool>,
    /// For each argument, its dtype: loads widen it to `f32`, stores round to it.
    pub dtypes: Vec<DType>,
    /// Its loops and statements.
    pub body: Body,
}

/// A kernel's loops: one over `x`, or one over rows `x` with the phases of each row.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Body {
    /// One loop over `x`, the flat element index.
    Pointwise(Vec<Stmt>),
    /// Pointwise loops one after another, each over `x in 0..N` with its statements (a foreach
    /// kernel).
    Foreach(Vec<(usize, Vec<Stmt>)>),
    /// A loop over rows `x`, each running the phases over `r in 0..row_len`.
    Rows {
        /// Elements per row.
        row_len: usize,
        /// The phases, in order.
        phases: Vec<Phase>,
    },
}

/// A kernel argument while the kernel runs, in its own dtype.
enum Buffer<'a> {
    /// Read only.
    In(Elements<'a>),
    /// Written: an output, or an input updated in place (read at an element, then written there).
    Out(ElementsMut<'a>),
}

impl Buffer<'_> {
    /// Element `at`, widened to `f32` (as generated code loads it).
    fn read(&self, at: usize) -> f32 {
        match self {
            Buffer::In(data) => data.get(at),
            Buffer::Out(data) => data.get(at),
        }
    }

    /// Stores `value` at `at`, rounded to the buffer's dtype (as generated code stores it).
    fn write(&mut self, at: usize, value: f32) {
        match self {
            Buffer::Out(data) => data.set(at, value),
            Buffer::In(_) => unreachable!("the parser marks every argument a kernel stores to as written"),
        }
    }
}

impl HostKernel for Interpreted {
    fn name(&self) -> &str {
        &self.name
    }

    unsafe fn call(&self, args: &[*mut f32], len: &dyn Fn(usize) -> usize, xnumel: i64) {
        debug_assert_eq!(args.len(), self.written.len(), "{}: one buffer per argument", self.name);
        let mut buffers: Vec<Buffer> = args
            .iter()
            .zip(self.written.iter().zip(&self.dtypes))
            .enumerate()
            .map(|(i, (&ptr, (&written, &dtype)))| {
                // SAFETY: the caller guarantees `len(i)` valid elements (of the argument's dtype,
                // which the plan gave its buffer) from `ptr`, and that the outputs (the arguments
                // this kernel stores to) alias no other argument.
                unsafe {
                    if written {
                        Buffer::Out(ElementsMut::from_raw(ptr.cast(), len(i), dtype))
                    } else {
                        Buffer::In(Elements::from_raw(ptr.cast(), len(i), dtype))
                    }
                }
            })
            .collect();
        match &self.body {
            Body::Foreach(parts) => {
                for (n, stmts) in parts {
                    each_chunk(*n, |chunk| chunk.run(stmts, 0, &mut buffers));
                }
            }
            Body::Pointwise(stmts) => each_chunk(xnumel.max(0) as usize, |chunk| chunk.run(stmts, 0, &mut buffers)),
            Body::Rows { row_len, phases } => {
                each_chunk(xnumel.max(0) as usize, |chunk| chunk.rows(*row_len, phases, &mut buffers))
            }
        }
    }
}

/// Runs `f` on the chunks of `0..n`, in order.
fn each_chunk(n: usize, mut f: impl FnMut(&mut Chunk)) {
    for start in (0..n).step_by(CHUNK) {
        f(&mut Chunk { xs: start..(start + CHUNK).min(n), tmps: Vec::new() });
    }
}

/// An operand's values for a chunk: a temporary's column, or a constant.
#[derive(Clone, Copy)]
enum Column<'a> {
    Values(&'a [f32]),
    Splat(f32),
}

impl Column<'_> {
    fn get(self, i: usize) -> f32 {
        match self {
            Column::Values(values) => values[i],
            Column::Splat(c) => c,
        }
    }
}

/// The temporaries of one chunk of `x`: `tmps[t]` holds `tmpt` for every `x` of the chunk.
struct Chunk {
    xs: Range<usize>,
    tmps: Vec<Vec<f32>>,
}

impl Chunk {
    /// Runs each phase of the chunk's rows: row statements once, loops once per `r`, each
    /// loop's reductions accumulated into their temporaries. Sums accumulate in double precision,
    /// so that the interpreter's own rounding does not grow with the row: it is a reference.
    fn rows(&mut self, row_len: usize, phases: &[Phase], buffers: &mut [Buffer]) {
        for phase in phases {
            match phase {
                Phase::Row(stmts) => self.run(stmts, 0, buffers),
                Phase::Loop { stmts, reductions } => {
                    let identity = |combine| match combine {
                        Combine::Sum => 0.0,
                        Combine::Max => f64::NEG_INFINITY,
                    };
                    let mut accumulators: Vec<Vec<f64>> =
                        reductions.iter().map(|reduce| vec![identity(reduce.combine); self.xs.len()]).collect();
                    for r in 0..row_len {
                        self.run(stmts, r, buffers);
                        for (reduce, accumulator) in reductions.iter().zip(&mut accumulators) {
                            let values = self.column(&reduce.value);
                            for (i, acc) in accumulator.iter_mut().enumerate() {
                                let v = f64::from(values.get(i));
                                *acc = match reduce.combine {
                                    Combine::Sum => *acc + v,
                                    // NaN-propagating, as the printers' `maximum`.
                                    Combine::Max if *acc > v || acc.is_nan() => *acc,
                                    Combine::Max => v,
                                };
                            }
                        }
                    }
                    for (reduce, accumulator) in reductions.iter().zip(accumulators) {
                        self.set(reduce.tmp, accumulator.into_iter().map(|v| v as f32).collect());
                    }
                }
            }
        }
    }

    /// Runs `stmts` for every `x` of the chunk at position `r` of the row. Each temporary's column
    /// is rewritten in place, so that a loop over a long row allocates nothing per `r`.
    fn run(&mut self, stmts: &[Stmt], r: usize, buffers: &mut [Buffer]) {
        for stmt in stmts {
            match stmt {
                Stmt::Load { tmp, arg, index } => {
                    let mut out = self.take(*tmp);
                    out.extend(self.xs.clone().map(|x| buffers[*arg].read(index.at(x, r))));
                    self.tmps[*tmp] = out;
                }
                Stmt::Compute { tmp, op, operands } => {
                    let mut out = self.take(*tmp);
                    apply(op, |k| self.column(&operands[k]), self.xs.len(), &mut out);
                    self.tmps[*tmp] = out;
                }
                Stmt::Store { arg, index, value } => {
                    let values = self.column(value);
                    for (i, x) in self.xs.clone().enumerate() {
                        buffers[*arg].write(index.at(x, r), values.get(i));
                    }
                }
            }
        }
    }

    /// An operand's values for the chunk.
    fn column(&self, value: &Value) -> Column<'_> {
        match value {
            Value::Tmp(t) => Column::Values(&self.tmps[*t]),
            Value::Constant(c) => Column::Splat(*c),
        }
    }

    /// Temporary `tmp`'s column, emptied, to be written again (its memory kept).
    fn take(&mut self, tmp: usize) -> Vec<f32> {
        if self.tmps.len() <= tmp {
            self.tmps.resize(tmp + 1, Vec::new());
        }
        let mut column = std::mem::take(&mut self.tmps[tmp]);
        column.clear();
        column
    }

    fn set(&mut self, tmp: usize, values: Vec<f32>) {
        self.take(tmp);
        self.tmps[tmp] = values;
    }
}

/// `op` on the columns `operand(k)` of `n` values, appended to `out`, computed as generated C
/// computes them: the vector math for the transcendental functions, the op catalogue's reference
/// functions for the others, a custom op's compiled C.
fn apply<'a>(op: &PointwiseOp, operand: impl Fn(usize) -> Column<'a>, n: usize, out: &mut Vec<f32>) {
    struct Map1<'a, 'o>(Column<'a>, usize, &'o mut Vec<f32>);
    impl UnaryVisitor for Map1<'_, '_> {
        type Output = ();
        fn visit(self, f: impl Fn(f32) -> f32 + Sync) {
            let Map1(a, n, out) = self;
            out.extend((0..n).map(|i| f(a.get(i))));
        }
    }
    struct Map2<'a, 'o>(Column<'a>, Column<'a>, usize, &'o mut Vec<f32>);
    impl BinaryVisitor for Map2<'_, '_> {
        type Output = ();
        fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) {
            let Map2(a, b, n, out) = self;
            out.extend((0..n).map(|i| f(a.get(i), b.get(i))));
        }
    }
    match op {
        PointwiseOp::Copy => {
            let a = operand(0);
            out.extend((0..n).map(|i| a.get(i)));
        }
        // A conversion inside a chain: the value rounded to the dtype, kept as an `f32`.
        PointwiseOp::ToDtype(dtype) => {
            let a = operand(0);
            out.extend((0..n).map(|i| dtype.round(a.get(i))));
        }
        PointwiseOp::Where => {
            let (cond, a, b) = (operand(0), operand(1), operand(2));
            out.extend((0..n).map(|i| if cond.get(i) != 0.0 { a.get(i) } else { b.get(i) }));
        }
        PointwiseOp::Unary(u) => match vecmath::for_op(*u) {
            Some((_, f)) => {
                let a = operand(0);
                out.extend((0..n).map(|i| f(a.get(i))));
            }
            None => u.with_fn(Map1(operand(0), n, out)),
        },
        PointwiseOp::Binary(b) => b.with_fn(Map2(operand(0), operand(1), n, out)),
        PointwiseOp::Custom(custom) => {
            let dense: Vec<Vec<f32>> =
                (0..custom.arity()).map(|k| (0..n).map(|i| operand(k).get(i)).collect()).collect();
            out.extend(custom.run_cpu(&dense, n));
        }
    }
}
