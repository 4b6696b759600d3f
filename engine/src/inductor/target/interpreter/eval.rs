//! Running one kernel of parsed kernel IR over host buffers, a chunk of `x` at a time: each
//! statement computes a column of values, one per `x` of the chunk (per row in a reduction), so
//! the interpreter's own work is done once per statement, not once per element.

use std::borrow::Cow;
use std::ops::Range;

use crate::device::cpu::vecmath;
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
    /// Its loops and statements.
    pub body: Body,
}

/// A kernel's loops: one over `x`, or one over rows `x` with the phases of each row.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Body {
    /// One loop over `x`, the flat element index.
    Pointwise(Vec<Stmt>),
    /// A loop over rows `x`, each running the phases over `r in 0..row_len`.
    Rows {
        /// Elements per row.
        row_len: usize,
        /// The phases, in order.
        phases: Vec<Phase>,
    },
}

/// A kernel argument while the kernel runs.
enum Buffer<'a> {
    /// Read only.
    In(&'a [f32]),
    /// Written (and never read: a kernel's values pass between statements in temporaries).
    Out(&'a mut [f32]),
}

impl Buffer<'_> {
    fn read(&self, at: usize) -> f32 {
        match self {
            Buffer::In(data) => data[at],
            Buffer::Out(data) => data[at],
        }
    }

    fn write(&mut self, at: usize, value: f32) {
        match self {
            Buffer::Out(data) => data[at] = value,
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
            .zip(&self.written)
            .enumerate()
            .map(|(i, (&ptr, &written))| {
                // SAFETY: the caller guarantees `len(i)` valid elements from `ptr`, and that the
                // outputs (the arguments this kernel stores to) alias no other argument.
                unsafe {
                    if written {
                        Buffer::Out(std::slice::from_raw_parts_mut(ptr, len(i)))
                    } else {
                        Buffer::In(std::slice::from_raw_parts(ptr, len(i)))
                    }
                }
            })
            .collect();
        let n = xnumel.max(0) as usize;
        for start in (0..n).step_by(CHUNK) {
            let mut chunk = Chunk { xs: start..(start + CHUNK).min(n), tmps: Vec::new() };
            match &self.body {
                Body::Pointwise(stmts) => chunk.run(stmts, 0, &mut buffers),
                Body::Rows { row_len, phases } => chunk.rows(*row_len, phases, &mut buffers),
            }
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
                            for (acc, &v) in accumulator.iter_mut().zip(self.column(&reduce.value).iter()) {
                                let v = f64::from(v);
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

    /// Runs `stmts` for every `x` of the chunk at position `r` of the row.
    fn run(&mut self, stmts: &[Stmt], r: usize, buffers: &mut [Buffer]) {
        for stmt in stmts {
            match stmt {
                Stmt::Load { tmp, arg, index } => {
                    let values = self.xs.clone().map(|x| buffers[*arg].read(index.at(x, r))).collect();
                    self.set(*tmp, values);
                }
                Stmt::Compute { tmp, op, operands } => {
                    let inputs: Vec<Cow<[f32]>> = operands.iter().map(|v| self.column(v)).collect();
                    let values = apply(op, &inputs, self.xs.len());
                    self.set(*tmp, values);
                }
                Stmt::Store { arg, index, value } => {
                    let values = self.column(value).into_owned();
                    for (x, v) in self.xs.clone().zip(values) {
                        buffers[*arg].write(index.at(x, r), v);
                    }
                }
            }
        }
    }

    /// An operand's values for the chunk.
    fn column(&self, value: &Value) -> Cow<'_, [f32]> {
        match value {
            Value::Tmp(t) => Cow::Borrowed(&self.tmps[*t]),
            Value::Constant(c) => Cow::Owned(vec![*c; self.xs.len()]),
        }
    }

    fn set(&mut self, tmp: usize, values: Vec<f32>) {
        if self.tmps.len() <= tmp {
            self.tmps.resize(tmp + 1, Vec::new());
        }
        self.tmps[tmp] = values;
    }
}

/// `op` on columns of `n` values, computed as generated C computes them: the vector math for the
/// transcendental functions, the op catalogue's reference functions for the others, a custom
/// op's compiled C.
fn apply(op: &PointwiseOp, inputs: &[Cow<[f32]>], n: usize) -> Vec<f32> {
    struct Map1<'a>(&'a [f32]);
    impl UnaryVisitor for Map1<'_> {
        type Output = Vec<f32>;
        fn visit(self, f: impl Fn(f32) -> f32 + Sync) -> Vec<f32> {
            self.0.iter().map(|&x| f(x)).collect()
        }
    }
    struct Map2<'a>(&'a [f32], &'a [f32]);
    impl BinaryVisitor for Map2<'_> {
        type Output = Vec<f32>;
        fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) -> Vec<f32> {
            self.0.iter().zip(self.1).map(|(&a, &b)| f(a, b)).collect()
        }
    }
    match op {
        PointwiseOp::Copy => inputs[0].to_vec(),
        PointwiseOp::Where => (0..n).map(|i| if inputs[0][i] != 0.0 { inputs[1][i] } else { inputs[2][i] }).collect(),
        PointwiseOp::Unary(u) => match vecmath::for_op(*u) {
            Some((_, f)) => inputs[0].iter().map(|&x| f(x)).collect(),
            None => u.with_fn(Map1(&inputs[0])),
        },
        PointwiseOp::Binary(b) => b.with_fn(Map2(&inputs[0], &inputs[1])),
        PointwiseOp::Custom(custom) => {
            let dense: Vec<Vec<f32>> = inputs.iter().map(|c| c.to_vec()).collect();
            custom.run_cpu(&dense, n)
        }
    }
}
