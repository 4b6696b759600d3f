//! Elementwise kernels with broadcasting, shared by the plain and the tuned kernels. Each operand
//! is read as a dense slice, a single broadcast value, or (for strided and broadcast views)
//! gathered chunk by chunk, so the inner loops are plain slice zips that the compiler vectorises.
//! How those loops are compiled is the caller's choice ([`Loops`]): as written for the plain
//! kernels, once more for wider vectors for the tuned ones.

use super::gather::gather;
use super::{HostBuffer, Input, Loops, PARALLEL_THRESHOLD, allocator};
use crate::layout::{Layout, numel};
use crate::op::{BinaryOp, BinaryVisitor, UnaryOp, UnaryVisitor};
use crate::parallel;

/// Elements per unit of parallel work; large enough to amortise gathering, small enough to fit L2.
const CHUNK: usize = 1 << 14;

/// How one operand supplies its values for a range of output positions.
enum Source<'a> {
    Dense(&'a [f32]),
    Splat(f32),
    Strided(&'a [f32], Layout),
}

impl<'a> Source<'a> {
    fn new(input: Input<'a>, out_shape: &[usize]) -> Self {
        match input {
            Input::Scalar(v) => Source::Splat(v),
            Input::Tensor { buffer: data, layout } => {
                if layout.numel() == 1 {
                    Source::Splat(data[layout.offset()])
                } else if layout.shape() == out_shape && layout.is_contiguous() {
                    Source::Dense(&data[layout.offset()..layout.offset() + layout.numel()])
                } else {
                    Source::Strided(data, layout.expand(out_shape))
                }
            }
        }
    }

    /// Values for output positions `start..start + len`, using `scratch` when they must be built.
    fn chunk<'s>(&'s self, start: usize, len: usize, scratch: &'s mut Vec<f32>) -> &'s [f32] {
        match self {
            Source::Dense(d) => &d[start..start + len],
            Source::Splat(v) => {
                scratch.clear();
                scratch.resize(len, *v);
                scratch
            }
            Source::Strided(data, layout) => {
                scratch.resize(len, 0.0);
                gather(data, layout, start, scratch);
                scratch
            }
        }
    }
}

/// Fills `out` chunk by chunk, in parallel when it is large; `body(start, out_chunk)`, compiled as
/// `L` says.
fn for_each_chunk<L: Loops>(out: &mut [f32], body: impl Fn(usize, &mut [f32]) + Sync) {
    let body = |i: usize, c: &mut [f32]| {
        L::run(
            #[inline(always)]
            || body(i * CHUNK, c),
        )
    };
    if out.len() <= PARALLEL_THRESHOLD {
        out.chunks_mut(CHUNK).enumerate().for_each(|(i, c)| body(i, c));
    } else {
        parallel::for_each_chunk_mut(out, CHUNK, body);
    }
}

/// `f` applied to every element of `a` broadcast to `out_shape`.
pub(super) fn map1<L: Loops>(a: Input, out_shape: &[usize], f: impl Fn(f32) -> f32 + Sync) -> HostBuffer {
    let a = Source::new(a, out_shape);
    let mut out = allocator::uninit(numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o| {
            let mut sa = Vec::new();
            let xa = a.chunk(start, o.len(), &mut sa);
            o.iter_mut().zip(xa).for_each(|(o, &x)| *o = f(x));
        },
    );
    out
}

fn map2<L: Loops>(a: Input, b: Input, out_shape: &[usize], f: impl Fn(f32, f32) -> f32 + Sync) -> HostBuffer {
    let (a, b) = (Source::new(a, out_shape), Source::new(b, out_shape));
    let mut out = allocator::uninit(numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o| {
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            let xa = a.chunk(start, o.len(), &mut sa);
            let xb = b.chunk(start, o.len(), &mut sb);
            o.iter_mut().zip(xa.iter().zip(xb)).for_each(|(o, (&x, &y))| *o = f(x, y));
        },
    );
    out
}

/// `op` applied to every element, with the op catalogue's scalar function (libm's for the
/// transcendental ones).
pub(super) fn unary<L: Loops>(op: UnaryOp, a: Input, out_shape: &[usize]) -> HostBuffer {
    // One monomorphised loop per op, so each inner loop is branch-free.
    struct Map<'a, 's, L>(Input<'a>, &'s [usize], std::marker::PhantomData<L>);
    impl<L: Loops> UnaryVisitor for Map<'_, '_, L> {
        type Output = HostBuffer;
        fn visit(self, f: impl Fn(f32) -> f32 + Sync) -> HostBuffer {
            map1::<L>(self.0, self.1, f)
        }
    }
    op.with_fn(Map::<L>(a, out_shape, std::marker::PhantomData))
}

/// `op` applied to every pair of broadcast elements.
pub(super) fn binary<L: Loops>(op: BinaryOp, a: Input, b: Input, out_shape: &[usize]) -> HostBuffer {
    struct Map<'a, 's, L>(Input<'a>, Input<'a>, &'s [usize], std::marker::PhantomData<L>);
    impl<L: Loops> BinaryVisitor for Map<'_, '_, L> {
        type Output = HostBuffer;
        fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) -> HostBuffer {
            map2::<L>(self.0, self.1, self.2, f)
        }
    }
    op.with_fn(Map::<L>(a, b, out_shape, std::marker::PhantomData))
}

/// `a` where `cond != 0`, else `b`, all broadcast.
pub(super) fn where_<L: Loops>(cond: Input, a: Input, b: Input, out_shape: &[usize]) -> HostBuffer {
    let (c, a, b) = (Source::new(cond, out_shape), Source::new(a, out_shape), Source::new(b, out_shape));
    let mut out = allocator::uninit(numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o| {
            let (mut sc, mut sa, mut sb) = (Vec::new(), Vec::new(), Vec::new());
            let xc = c.chunk(start, o.len(), &mut sc);
            let xa = a.chunk(start, o.len(), &mut sa);
            let xb = b.chunk(start, o.len(), &mut sb);
            for (i, o) in o.iter_mut().enumerate() {
                *o = if xc[i] != 0.0 { xa[i] } else { xb[i] };
            }
        },
    );
    out
}
