//! Elementwise kernels with broadcasting, shared by the plain and the tuned kernels. Each operand
//! is read as a dense slice, a single broadcast value, or (for strided and broadcast views)
//! gathered chunk by chunk, so the inner loops are plain slice zips that the compiler vectorises.
//! Operands and outputs of a half-precision dtype are converted a chunk at a time: each chunk is
//! widened to `f32`, computed, and rounded as it is stored, so the memory traffic is the narrow
//! dtype's while every operation runs in `f32`.
//! How those loops are compiled is the caller's choice ([`Loops`]): as written for the plain
//! kernels, once more for wider vectors for the tuned ones.

use super::convert::{narrow, widen};
use super::gather::gather_f32;
use super::{Elements, HostBuffer, Input, Loops, PARALLEL_THRESHOLD, Stored, allocator, for_dtype};
use crate::dtype::DType;
use crate::layout::{Layout, numel};
use crate::op::{BinaryOp, BinaryVisitor, UnaryOp, UnaryVisitor};
use crate::parallel;

/// Elements per unit of parallel work; large enough to amortise gathering, small enough to fit L2.
const CHUNK: usize = 1 << 14;

/// Elements computed at a time into a narrower output: their float32 values (and the operands'
/// widened ones) stay in the L1 cache between widening, computing and rounding.
const NARROW_BLOCK: usize = 1 << 10;

/// How one operand supplies its values for a range of output positions, as `f32`.
enum Source<'a> {
    /// Contiguous `f32` elements, read in place.
    Dense(&'a [f32]),
    /// Contiguous elements of a narrower dtype, widened chunk by chunk.
    Narrow(Elements<'a>),
    Splat(f32),
    Strided(Elements<'a>, Layout),
}

impl<'a> Source<'a> {
    fn new(input: Input<'a>, out_shape: &[usize]) -> Self {
        match input {
            Input::Scalar(v) => Source::Splat(v),
            Input::Tensor { buffer, layout } => {
                let elements = buffer.elements();
                if layout.numel() == 1 {
                    Source::Splat(elements.get(layout.offset()))
                } else if layout.shape() == out_shape && layout.is_contiguous() {
                    match elements.slice(layout.offset(), layout.numel()) {
                        Elements::F32(d) => Source::Dense(d),
                        narrow => Source::Narrow(narrow),
                    }
                } else {
                    Source::Strided(elements, layout.expand(out_shape))
                }
            }
        }
    }

    /// Values for output positions `start..start + len`, using `scratch` when they must be built.
    fn chunk<'s, L: Loops>(&'s self, start: usize, len: usize, scratch: &'s mut Vec<f32>) -> &'s [f32] {
        match self {
            Source::Dense(d) => &d[start..start + len],
            Source::Narrow(e) => {
                let built = first(scratch, len);
                widen::<L>(e.slice(start, len), built);
                built
            }
            Source::Splat(v) => {
                let built = first(scratch, len);
                built.fill(*v);
                built
            }
            Source::Strided(data, layout) => {
                let built = first(scratch, len);
                gather_f32(*data, layout, start, built);
                built
            }
        }
    }
}

/// The first `len` elements of `scratch`, which grows to a task's largest block once rather than
/// being filled for every block.
fn first(scratch: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if scratch.len() < len {
        scratch.resize(len, 0.0);
    }
    &mut scratch[..len]
}

/// The buffers a task builds its operands' values in (one per operand), kept from one block of
/// the task to the next: allocating and zeroing them for each block took up to a third of a bf16
/// kernel's time (bench/NOTES-precision.md).
#[derive(Default)]
struct Scratch([Vec<f32>; 3]);

/// Fills `out` chunk by chunk, in parallel when it is large; `body(start, out_chunk, scratch)`,
/// compiled as `L` says, computes each chunk in `f32`, building operands in the task's `scratch`.
/// For a narrower `out` it computes a block of [`NARROW_BLOCK`] at a time, rounded as it is stored
/// (so each block is widened, computed and rounded while it sits in the L1 cache).
fn for_each_chunk<L: Loops>(out: &mut HostBuffer, body: impl Fn(usize, &mut [f32], &mut Scratch) + Sync) {
    // `body` on output positions `start..start + c.len()`, compiled as `L` says.
    let run = |start: usize, c: &mut [f32], scratch: &mut Scratch| {
        L::run(
            #[inline(always)]
            || body(start, c, scratch),
        )
    };
    if out.dtype() == DType::F32 {
        return in_chunks(out, |i, c| run(i * CHUNK, c, &mut Scratch::default()));
    }
    for_dtype!(out.dtype(), T => in_chunks(out.typed_mut::<T>(), |i, c: &mut [T]| {
        let (mut wide, mut scratch) = ([0.0f32; NARROW_BLOCK], Scratch::default());
        for (b, block) in c.chunks_mut(NARROW_BLOCK).enumerate() {
            let wide = &mut wide[..block.len()];
            run(i * CHUNK + b * NARROW_BLOCK, wide, &mut scratch);
            narrow::<L>(wide, T::wrap_mut(block));
        }
    }))
}

/// `chunk(i, c)` on every chunk `i` of [`CHUNK`] elements of `out`, in parallel when it is large.
fn in_chunks<T: Send>(out: &mut [T], chunk: impl Fn(usize, &mut [T]) + Sync) {
    if out.len() <= PARALLEL_THRESHOLD {
        out.chunks_mut(CHUNK).enumerate().for_each(|(i, c)| chunk(i, c));
    } else {
        parallel::for_each_chunk_mut(out, CHUNK, chunk);
    }
}

/// `f` applied to every element of `a` broadcast to `out_shape`, stored as `dtype`.
pub(super) fn map1<L: Loops>(a: Input, out_shape: &[usize], dtype: DType, f: impl Fn(f32) -> f32 + Sync) -> HostBuffer {
    let a = Source::new(a, out_shape);
    let mut out = allocator::uninit_of(dtype, numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o, scratch| {
            let xa = a.chunk::<L>(start, o.len(), &mut scratch.0[0]);
            o.iter_mut().zip(xa).for_each(|(o, &x)| *o = f(x));
        },
    );
    out
}

fn map2<L: Loops>(
    a: Input,
    b: Input,
    out_shape: &[usize],
    dtype: DType,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> HostBuffer {
    let (a, b) = (Source::new(a, out_shape), Source::new(b, out_shape));
    let mut out = allocator::uninit_of(dtype, numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o, scratch| {
            let [sa, sb, _] = &mut scratch.0;
            let xa = a.chunk::<L>(start, o.len(), sa);
            let xb = b.chunk::<L>(start, o.len(), sb);
            o.iter_mut().zip(xa.iter().zip(xb)).for_each(|(o, (&x, &y))| *o = f(x, y));
        },
    );
    out
}

/// The input's elements converted to `dtype` (rounded to nearest, ties to even).
pub(super) fn convert<L: Loops>(a: Input, out_shape: &[usize], dtype: DType) -> HostBuffer {
    map1::<L>(a, out_shape, dtype, |x| x)
}

/// `op` applied to every element, with the op catalogue's scalar function (libm's for the
/// transcendental ones), stored in the input's dtype.
pub(super) fn unary<L: Loops>(op: UnaryOp, a: Input, out_shape: &[usize]) -> HostBuffer {
    // One monomorphised loop per op, so each inner loop is branch-free.
    struct Map<'a, 's, L>(Input<'a>, &'s [usize], std::marker::PhantomData<L>);
    impl<L: Loops> UnaryVisitor for Map<'_, '_, L> {
        type Output = HostBuffer;
        fn visit(self, f: impl Fn(f32) -> f32 + Sync) -> HostBuffer {
            map1::<L>(self.0, self.1, input_dtype(self.0), f)
        }
    }
    op.with_fn(Map::<L>(a, out_shape, std::marker::PhantomData))
}

/// The dtype of a tensor operand.
pub(super) fn input_dtype(input: Input) -> DType {
    input.tensor().0.dtype()
}

/// `op` applied to every pair of broadcast elements, stored as `dtype`.
pub(super) fn binary<L: Loops>(op: BinaryOp, a: Input, b: Input, out_shape: &[usize], dtype: DType) -> HostBuffer {
    struct Map<'a, 's, L>(Input<'a>, Input<'a>, &'s [usize], DType, std::marker::PhantomData<L>);
    impl<L: Loops> BinaryVisitor for Map<'_, '_, L> {
        type Output = HostBuffer;
        fn visit(self, f: impl Fn(f32, f32) -> f32 + Sync) -> HostBuffer {
            map2::<L>(self.0, self.1, self.2, self.3, f)
        }
    }
    op.with_fn(Map::<L>(a, b, out_shape, dtype, std::marker::PhantomData))
}

/// `a` where `cond != 0`, else `b`, all broadcast, stored as `dtype`.
pub(super) fn where_<L: Loops>(cond: Input, a: Input, b: Input, out_shape: &[usize], dtype: DType) -> HostBuffer {
    let (c, a, b) = (Source::new(cond, out_shape), Source::new(a, out_shape), Source::new(b, out_shape));
    let mut out = allocator::uninit_of(dtype, numel(out_shape));
    for_each_chunk::<L>(
        &mut out,
        #[inline(always)]
        |start, o, scratch| {
            let [sc, sa, sb] = &mut scratch.0;
            let xc = c.chunk::<L>(start, o.len(), sc);
            let xa = a.chunk::<L>(start, o.len(), sa);
            let xb = b.chunk::<L>(start, o.len(), sb);
            for (i, o) in o.iter_mut().enumerate() {
                *o = if xc[i] != 0.0 { xa[i] } else { xb[i] };
            }
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::tensor::Tensor;

    /// A bf16 kernel over several blocks of a task, reading a dense, a broadcast, a transposed
    /// and a one-element operand: each block's operands are built afresh in the task's reused
    /// buffers, so every element is the float32 result rounded once.
    #[test]
    fn half_precision_blocks_reuse_their_buffers_without_mixing_them() {
        let (rows, cols) = (7, 1000);
        let f = |seed| Tensor::uniform(&[rows, cols], -2.0, 2.0, seed).to_dtype(DType::BF16).unwrap();
        let (a, row) = (f(1), Tensor::uniform(&[cols], -2.0, 2.0, 2).to_dtype(DType::BF16).unwrap());
        let t = Tensor::uniform(&[cols, rows], -2.0, 2.0, 3).to_dtype(DType::BF16).unwrap().t().unwrap();
        let one = Tensor::uniform(&[1], -2.0, 2.0, 4).to_dtype(DType::BF16).unwrap();
        let got = a.add(&row).unwrap().mul(&t).unwrap().sub(&one).unwrap();
        let wide = |x: &Tensor| x.to_dtype(DType::F32).unwrap();
        let rounded = |x: Tensor| x.to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap();
        let want = rounded(
            rounded(rounded(wide(&a).add(&wide(&row)).unwrap()).mul(&wide(&t)).unwrap()).sub(&wide(&one)).unwrap(),
        );
        assert_eq!(got.to_dtype(DType::F32).unwrap().to_vec().unwrap(), want.to_vec().unwrap());
    }
}
