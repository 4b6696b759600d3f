//! The CUDA C printer, standing where TorchInductor's `codegen/triton.py` stands: each kernel
//! becomes an `extern "C" __global__` function for NVRTC, with the same statements as the C
//! printer arranged for thousands of threads.
//!
//! - Pointwise kernels: a grid-stride loop in which each thread takes four neighbouring elements,
//!   loading and storing them as one 16-byte `float4` where index and alignment allow; a kernel
//!   whose buffers are all bf16 or f16 takes eight, 16 bytes again (`vload8`: one `uint4`, four
//!   `bf16x2`/`half2` pairs widened to float); four 8-bit floats move as one 32-bit word.
//! - Every load of a half-precision buffer widens to float and every store into one rounds
//!   (`bf16_to_float`, `float_to_bf16`, from the prelude): the math is float32, the memory traffic
//!   the narrow dtype's, as Inductor's Triton code upcasts its loads.
//! - Foreach kernels: the pointwise loop of each part in turn, in a block of its own with its own
//!   extent (`xnumel`); every thread of the grid strides through each part, so one launch of the
//!   whole grid covers them all.
//! - Persistent reductions (`per_`): each thread keeps its share of a row in registers, so the row
//!   is read once however many loops the phases need, 16 bytes at a time where it can. A row of
//!   up to 768 elements goes to one warp, four rows to a block, and its partial results meet
//!   through warp shuffles alone; a longer row takes a whole block (shuffles, then shared memory).
//! - Looped reductions (`red_`, rows too long for registers): one block per row striding through
//!   it, re-reading the row in each loop. Rows along a strided dimension: one thread per row.
//! - Indices and loop variables are `int` unless a buffer of the kernel is too large for them,
//!   then `long long` ([`index_type`], Inductor's `index_dtype`).

use std::fmt::Write;

use super::{
    Dialect, RowLoops, Spelling, block_reduce, c_type, combine_expr, helper_functions, identity, row_loops, widen,
};
use crate::device::cuda::DTYPES;
use crate::dtype::DType;
use crate::inductor::index::{FlatIndex, Var};
use crate::inductor::kernel::{Combine, Kernel, KernelBody, Phase, Reduce, Stmt, Value};
use crate::inductor::launch::{Grid, Launch, THREADS};

/// Elements each thread of a pointwise kernel handles per step: one `float4`.
const VEC: usize = 4;

/// Elements a thread takes per step in kernel `k`: 16 bytes of its widest buffer, so eight when
/// every buffer is bf16 or f16 (one `uint4` each), four otherwise.
fn vec_width(k: &Kernel) -> usize {
    if !k.args.is_empty() && k.args.iter().all(|a| a.dtype.is_half()) { 2 * VEC } else { VEC }
}

/// Kernels whose [`Kernel::index_extent`] is below this index in 32 bits: 2^31, less 2^28 of
/// room for the step a grid-stride loop takes past its end, since a loop variable below the
/// extent plus one step must still fit in an `int`. The largest step is a pointwise kernel's
/// over 16-bit buffers: eight elements for every thread of the grid, which
/// [`Launch::grid_size`] caps at four waves of 2048 threads per multiprocessor, so at most 2^16
/// elements per multiprocessor whatever the block size. 2^28 covers 4096 multiprocessors, 31
/// times an H100's 132; a reduction's steps (over rows, or a block's threads along a row) are
/// smaller. `the_int_margin_covers_every_grid_stride` checks this against the launches.
const INT_INDEX_LIMIT: usize = (1 << 31) - (1 << 28);

/// The C type of every index and loop variable in kernel `k`'s source, Inductor's
/// `index_dtype`: `int` while every buffer it reads or writes and its iteration space stay below
/// 2^31 - 2^28 elements (`INT_INDEX_LIMIT`, which says why the margin), as Triton's kernels index
/// in `tl.int32` unless some buffer has 2^31 elements or more; `long long` otherwise. 32-bit
/// arithmetic is the cheaper on a GPU: a 64-bit modulo (a broadcast bias's `x0 % 3072`) takes
/// about 25 instructions. The kernel is
/// printed for the sizes it was traced with, so the choice holds whenever it runs (a dynamic
/// graph prints its kernels again for each binding of its sizes).
pub fn index_type(k: &Kernel) -> &'static str {
    if k.index_extent() < INT_INDEX_LIMIT { "int" } else { "long long" }
}

/// A printed CUDA kernel and how to launch it.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaKernel {
    /// The kernel's name, its symbol in the module.
    pub name: String,
    /// CUDA C source of the kernel alone (see [`prelude`] for what precedes it).
    pub source: String,
    /// Block size and grid rule.
    pub launch: Launch,
}

/// The helpers every CUDA module starts with: NaN-propagating max/min and warp and block
/// reductions (every thread of the block receives the result).
pub fn prelude() -> String {
    let mut out = DTYPES.to_string();
    out.push_str(&helper_functions("__device__ __forceinline__"));
    for combine in [Combine::Sum, Combine::Max] {
        out.push_str(&reduction_helpers(combine));
    }
    out
}

/// `warp_<op>` (a butterfly of shuffles) and `block_<op>` (warps, then one partial per warp in
/// `smem`) for one way of combining. The first barrier keeps the readers of a previous
/// reduction's partials safe from this one's writes.
fn reduction_helpers(combine: Combine) -> String {
    let block = block_reduce(combine);
    let warp = block.replace("block", "warp");
    let step = combine_expr(combine, "v", "__shfl_xor_sync(0xffffffffu, v, offset)");
    let identity = identity(combine, Dialect::Cuda);
    format!(
        r#"
__device__ __forceinline__ float {warp}(float v) {{
    for (int offset = 16; offset > 0; offset >>= 1) v = {step};
    return v;
}}
__device__ __forceinline__ float {block}(float v, float* smem) {{
    v = {warp}(v);
    if (blockDim.x <= 32) return v;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < (blockDim.x >> 5) ? smem[threadIdx.x & 31] : {identity};
    return {warp}(v);
}}
"#
    )
}

/// A whole CUDA C module: the prelude, then every kernel.
pub fn module(kernels: &[CudaKernel]) -> String {
    crate::wires::trip(crate::wires::Wire::CudaModule);
    let mut out = prelude();
    for k in kernels {
        out.push('\n');
        out.push_str(&k.source);
    }
    out
}

/// How a kernel is launched, planned from its loop structure before it is printed: the printers
/// below write code for the block size it chooses.
pub fn launch(k: &Kernel) -> Launch {
    match &k.body {
        KernelBody::Pointwise(_) | KernelBody::Foreach(_) => {
            Launch { block: THREADS, grid: Grid::Elements { per_block: THREADS * vec_width(k) as u32 } }
        }
        KernelBody::Reduction { persistent: true, row_len, .. } => match persistent_shape(*row_len, 1) {
            RowSplit { rows_per_block: 1, threads, .. } => Launch { block: threads as u32, grid: Grid::Rows },
            RowSplit { rows_per_block, threads, .. } => Launch {
                block: (rows_per_block * threads) as u32,
                grid: Grid::Elements { per_block: rows_per_block as u32 },
            },
        },
        KernelBody::Reduction { innermost: true, .. } => Launch { block: 1024, grid: Grid::Rows },
        KernelBody::Reduction { .. } => Launch { block: THREADS, grid: Grid::Elements { per_block: THREADS } },
    }
}

/// The launches max-autotune times for a kernel, [`launch`]'s first: the block sizes the printed
/// code works with unchanged (its loops stride by `blockDim.x`). A persistent reduction has only
/// its own, since its thread count is written into the indexing of each row.
pub fn launch_candidates(k: &Kernel) -> Vec<Launch> {
    let default = launch(k);
    let blocks: &[u32] = match &k.body {
        KernelBody::Pointwise(_) | KernelBody::Foreach(_) => &[128, 256, 512, 1024],
        KernelBody::Reduction { persistent: true, .. } => &[],
        KernelBody::Reduction { innermost: true, .. } => &[128, 256, 512, 1024],
        KernelBody::Reduction { .. } => &[64, 128, 256, 512],
    };
    let per_thread = match default.grid {
        Grid::Elements { per_block } => Some(per_block / default.block),
        Grid::Rows => None,
    };
    let mut candidates = vec![default];
    for &block in blocks {
        let grid = match per_thread {
            Some(elements) => Grid::Elements { per_block: block * elements },
            None => Grid::Rows,
        };
        let candidate = Launch { block, grid };
        if !candidates.contains(&candidate) {
            candidates.push(candidate);
        }
    }
    candidates
}

/// Prints one kernel for the launch [`launch`] plans.
pub fn kernel(k: &Kernel) -> CudaKernel {
    kernel_for(k, &k.name, launch(k))
}

/// Prints one kernel, named `name`, for `launch`, one of [`launch_candidates`]: only its
/// `__launch_bounds__` depend on the block size.
pub fn kernel_for(k: &Kernel, name: &str, launch: Launch) -> CudaKernel {
    crate::wires::trip(crate::wires::Wire::CudaKernel);
    let ty = index_type(k);
    let body = match &k.body {
        KernelBody::Pointwise(stmts) => pointwise(k, stmts),
        KernelBody::Foreach(parts) => parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let inner: String = pointwise(k, &part.stmts).lines().map(|l| format!("    {l}\n")).collect();
                format!(
                    "    // loop {} of {}\n    {{\n        const {ty} xnumel = {};\n{inner}    }}\n",
                    i + 1,
                    parts.len(),
                    part.xnumel
                )
            })
            .collect(),
        KernelBody::Reduction { persistent: true, row_len, phases, .. } => persistent(k, *row_len, phases),
        KernelBody::Reduction { innermost: true, .. } => {
            let mut body = String::from("    __shared__ float smem[32];\n");
            writeln!(body, "    for ({ty} x = blockIdx.x; x < xnumel; x += gridDim.x) {{").unwrap();
            body.push_str(&row_loops(k, RowLoops::BlockStrided, "        "));
            body.push_str("    }\n");
            body
        }
        KernelBody::Reduction { .. } => {
            let mut body = format!(
                "    const {ty} step = ({ty})blockDim.x * gridDim.x;\n    \
                 for ({ty} x = blockIdx.x * ({ty})blockDim.x + threadIdx.x; x < xnumel; x += step) {{\n",
            );
            body.push_str(&row_loops(k, RowLoops::Sequential, "        "));
            body.push_str("    }\n");
            body
        }
    };
    // The runtime passes the extent as a 64-bit integer; a 32-bit kernel narrows it once (a
    // foreach kernel's parts have extents of their own).
    let (xnumel, narrow) = match (ty, &k.body) {
        ("int", KernelBody::Pointwise(_) | KernelBody::Reduction { .. }) => {
            ("xnumel64", "    const int xnumel = (int)xnumel64;\n")
        }
        _ => ("xnumel", ""),
    };
    let params: Vec<String> = k
        .args
        .iter()
        .map(|a| {
            let constness = if a.output { "" } else { "const " };
            format!("{constness}{}* __restrict__ {}", c_type(a.dtype), a.name)
        })
        .chain([format!("long long {xnumel}")])
        .collect();
    let source = format!(
        "extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{narrow}{body}}}\n",
        launch.block,
        name,
        params.join(", ")
    );
    CudaKernel { name: name.to_string(), source, launch }
}

/// How a load or store of `VEC` neighbouring elements can be done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// One aligned 16-byte access.
    Vector,
    /// The same element for all four: one scalar access.
    Uniform,
    /// Four separate accesses.
    Gather,
}

/// Classifies an index for a group of `vec` consecutive values of `var` starting at a multiple
/// of `vec`: vector when it steps by one through aligned memory, uniform when it does not move.
/// Four 8-bit floats are one 32-bit access (`vload4`/`vstore4` of the prelude); eight lanes are
/// only ever planned for kernels of 16-bit buffers alone.
fn access(index: &FlatIndex, var: Var, vec: usize, dtype: DType) -> Access {
    let moves = |t: &&crate::inductor::index::Term| t.var == var && !t.div.is_multiple_of(vec);
    let steady: Vec<_> = index.terms.iter().filter(|t| !moves(t)).collect();
    let moving: Vec<_> = index.terms.iter().filter(moves).collect();
    let aligned = index.offset.is_multiple_of(vec) && steady.iter().all(|t| t.coeff.is_multiple_of(vec));
    match moving.as_slice() {
        [] => Access::Uniform,
        [t] if t.div == 1
            && t.coeff == 1
            && t.modulo.is_none_or(|m| m.is_multiple_of(vec))
            && aligned
            && !(dtype.is_fp8() && vec != VEC) =>
        {
            Access::Vector
        }
        _ => Access::Gather,
    }
}

/// `vec` neighbouring elements of `ptr` (of `dtype`) from `index`, widened into `dst(0..vec)`: a
/// `float4` for four floats (unpacked into `dst`, which names the array's elements), or the
/// prelude's `vload4`/`vload8` for 16-bit elements (one `uint2` or `uint4`, pairs widened),
/// whose destination is the array `array`.
fn load_vec(ptr: &str, index: &str, dtype: DType, vec: usize, array: &str, dst: impl Fn(usize) -> String) -> String {
    if dtype == DType::F32 {
        let lanes: Vec<String> = (0..vec).map(|j| format!("{} = v.{};", dst(j), ["x", "y", "z", "w"][j])).collect();
        return format!(
            "{{ const float4 v = *reinterpret_cast<const float4*>({ptr} + {index}); {} }}",
            lanes.join(" ")
        );
    }
    format!("vload{vec}({ptr} + {index}, {array});")
}

/// `vec` floats `src(0..vec)` (the array `array`) rounded and stored as neighbouring elements of
/// `ptr` from `index`, as [`load_vec`] reads them.
fn store_vec(ptr: &str, index: &str, dtype: DType, vec: usize, array: &str, src: impl Fn(usize) -> String) -> String {
    if dtype == DType::F32 {
        let lanes: Vec<String> = (0..vec).map(&src).collect();
        return format!("*reinterpret_cast<float4*>({ptr} + {index}) = make_float4({});", lanes.join(", "));
    }
    format!("vstore{vec}({ptr} + {index}, {array});")
}

/// The `aligned` flag: every pointer used with 16-byte accesses is 16-byte aligned.
fn alignment_check(k: &Kernel, args: &[usize]) -> String {
    let mut args = args.to_vec();
    args.sort_unstable();
    args.dedup();
    if args.is_empty() {
        return "    const bool aligned = true;\n".into();
    }
    let ptrs: Vec<String> =
        args.iter().map(|&a| format!("reinterpret_cast<unsigned long long>({})", k.args[a].name)).collect();
    format!("    const bool aligned = (({}) & 15) == 0;\n", ptrs.join(" | "))
}

fn pointwise(k: &Kernel, stmts: &[Stmt]) -> String {
    let scalar = super::scalar_spelling(Dialect::Cuda);
    let lane = Spelling { dialect: Dialect::Cuda, tmp: &|t| format!("tmp{t}[j]"), index: &|i| i.to_c() };
    let vec = vec_width(k);
    let arg_of = |s: &Stmt| match s {
        Stmt::Load { arg, .. } | Stmt::Store { arg, .. } => Some(&k.args[*arg]),
        Stmt::Compute { .. } => None,
    };
    let class_of = |s: &Stmt, index: &FlatIndex| access(index, Var::X, vec, arg_of(s).map_or(DType::F32, |a| a.dtype));
    let vector_args: Vec<usize> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Load { arg, index, .. } | Stmt::Store { arg, index, .. } if class_of(s, index) == Access::Vector => {
                Some(*arg)
            }
            _ => None,
        })
        .collect();
    let tmps: Vec<String> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } => Some(format!("tmp{tmp}[{vec}]")),
            Stmt::Store { .. } => None,
        })
        .collect();
    let ty = index_type(k);
    let mut b = alignment_check(k, &vector_args);
    writeln!(b, "    const {ty} step = {vec} * ({ty})blockDim.x * gridDim.x;").unwrap();
    writeln!(
        b,
        "    for ({ty} x0 = {vec} * (blockIdx.x * ({ty})blockDim.x + threadIdx.x); x0 < xnumel; x0 += step) {{"
    )
    .unwrap();
    writeln!(b, "        if (aligned && x0 + {vec} <= xnumel) {{").unwrap();
    if !tmps.is_empty() {
        writeln!(b, "            float {};", tmps.join(", ")).unwrap();
    }
    let at_x0 = |i: &FlatIndex| i.render("x0", "r");
    for s in stmts {
        if let Stmt::Load { tmp, arg, index } = s {
            let arg = &k.args[*arg];
            match class_of(s, index) {
                Access::Vector => writeln!(
                    b,
                    "            {}",
                    load_vec(&arg.name, &at_x0(index), arg.dtype, vec, &format!("tmp{tmp}"), |j| format!(
                        "tmp{tmp}[{j}]"
                    ))
                ),
                Access::Uniform => {
                    let lanes: Vec<String> = (0..vec).map(|j| format!("tmp{tmp}[{j}]")).collect();
                    let element = format!("{}[{}]", arg.name, at_x0(index));
                    writeln!(b, "            {} = {};", lanes.join(" = "), widen(arg.dtype, &element))
                }
                Access::Gather => Ok(()),
            }
            .unwrap();
        }
    }
    let in_lanes: Vec<&Stmt> = stmts
        .iter()
        .filter(|s| match s {
            Stmt::Load { index, .. } => class_of(s, index) == Access::Gather,
            Stmt::Store { index, .. } => class_of(s, index) != Access::Vector,
            Stmt::Compute { .. } => true,
        })
        .collect();
    writeln!(b, "            #pragma unroll\n            for (int j = 0; j < {vec}; j++) {{").unwrap();
    if in_lanes.iter().any(|s| matches!(s, Stmt::Load { .. } | Stmt::Store { .. })) {
        writeln!(b, "                const {ty} x = x0 + j;").unwrap();
    }
    for s in in_lanes {
        writeln!(b, "                {}", lane.stmt(k, s, false)).unwrap();
    }
    b.push_str("            }\n");
    for s in stmts {
        if let Stmt::Store { arg, index, value: Value::Tmp(t) } = s
            && class_of(s, index) == Access::Vector
        {
            let arg = &k.args[*arg];
            let array = format!("tmp{t}");
            let store = store_vec(&arg.name, &at_x0(index), arg.dtype, vec, &array, |j| format!("tmp{t}[{j}]"));
            writeln!(b, "            {store}").unwrap();
        }
    }
    b.push_str("        } else {\n");
    writeln!(b, "            for ({ty} x = x0; x < xnumel && x < x0 + {vec}; x++) {{").unwrap();
    for s in stmts {
        writeln!(b, "                {}", scalar.stmt(k, s, true)).unwrap();
    }
    b.push_str("            }\n        }\n    }\n");
    b
}

/// Rows up to this long go one to a warp; longer ones take a whole block each. A lane keeps
/// `row_len / 32` values of each array in registers: at 768 that took 89 registers a thread for
/// the block's second layer norm, five blocks of four rows a multiprocessor, and 8192 rows ran in
/// 3.1 waves, the last one nearly empty; a block of 96 threads a row needs 47 (see
/// bench/NOTES-precision.md).
const WARP_ROW_MAX: usize = 512;
/// Rows (warps) in a block of a warp-per-row reduction: blocks of 128 threads, small enough that
/// a thread's 16 slots of a few arrays leave room for several blocks on a multiprocessor.
const WARP_ROWS_PER_BLOCK: usize = 4;

/// How a persistent reduction spreads its rows over threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RowSplit {
    /// Threads that share one row: a warp (32) for rows up to [`WARP_ROW_MAX`], else a block.
    threads: usize,
    /// Rows one block works on at a time: several warps of one row each, or one.
    rows_per_block: usize,
    /// Register slots each thread keeps per array, a multiple of the access width.
    slots: usize,
}

/// The split of rows of `row_len` read `vec` elements at a time (the thread counts do not depend
/// on `vec`). A warp per row while a row fits in 16 registers a lane: its partial results meet
/// through shuffles alone, with no barrier, and each block keeps [`WARP_ROWS_PER_BLOCK`] rows in
/// flight. Longer rows take a block each, eight elements a thread, in whole warps (96 threads
/// for 768, 192 for 1536), so that a row whose length is a multiple of 256 fills every thread.
fn persistent_shape(row_len: usize, vec: usize) -> RowSplit {
    let (threads, rows_per_block) = if row_len <= WARP_ROW_MAX {
        (32, WARP_ROWS_PER_BLOCK)
    } else {
        (row_len.div_ceil(8).next_multiple_of(32).clamp(32, 1024), 1)
    };
    let slots = row_len.div_ceil(threads).div_ceil(vec) * vec;
    RowSplit { threads, rows_per_block, slots }
}

fn persistent(k: &Kernel, row_len: usize, phases: &[Phase]) -> String {
    let width = vec_width(k);
    let vec = if row_len.is_multiple_of(width) { width } else { 1 };
    let RowSplit { threads, rows_per_block, slots } = persistent_shape(row_len, vec);
    let exact = threads * slots == row_len;
    // A thread's place in its row, and how the row's partial results meet.
    let by_warp = rows_per_block > 1;
    let lane = if by_warp { "lane" } else { "threadIdx.x" };
    let ty = index_type(k);
    let combine_row = |tmp: usize, combine: Combine| {
        let helper = block_reduce(combine);
        if by_warp {
            format!("tmp{tmp} = {}(tmp{tmp});", helper.replace("block", "warp"))
        } else {
            format!("tmp{tmp} = {helper}(tmp{tmp}, smem);")
        }
    };
    let dtype_of = |arg: usize| k.args[arg].dtype;
    let class_of = |arg: usize, index: &FlatIndex| {
        if vec == width { access(index, Var::R, vec, dtype_of(arg)) } else { Access::Gather }
    };
    let element_stmts = || {
        phases.iter().flat_map(|p| match p {
            Phase::Loop { stmts, .. } => stmts.as_slice(),
            Phase::Row(_) => &[],
        })
    };
    let vector_args: Vec<usize> = element_stmts()
        .filter_map(|s| match s {
            Stmt::Load { arg, index, .. } | Stmt::Store { arg, index, .. }
                if class_of(*arg, index) == Access::Vector =>
            {
                Some(*arg)
            }
            _ => None,
        })
        .collect();
    let mut arrays: Vec<usize> = element_stmts()
        .filter_map(|s| match s {
            Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } => Some(*tmp),
            Stmt::Store { .. } => None,
        })
        .collect();
    arrays.sort_unstable();
    arrays.dedup();

    let mut b = if by_warp { String::new() } else { String::from("    __shared__ float smem[32];\n") };
    b.push_str(&alignment_check(k, &vector_args));
    if by_warp {
        writeln!(
            b,
            "    // A warp per row of {row_len}, {slots} per lane, kept in registers; {rows_per_block} rows per block."
        )
        .unwrap();
        b.push_str("    const int lane = threadIdx.x & 31;\n");
        writeln!(
            b,
            "    for ({ty} x = ({ty})blockIdx.x * {rows_per_block} + threadIdx.x / 32; x < xnumel; x += {rows_per_block} * ({ty})gridDim.x) {{"
        )
        .unwrap();
    } else {
        writeln!(b, "    // {threads} threads share each row of {row_len}, {slots} per thread, kept in registers.")
            .unwrap();
        writeln!(b, "    for ({ty} x = blockIdx.x; x < xnumel; x += gridDim.x) {{").unwrap();
    }
    let decls: Vec<String> = arrays.iter().map(|t| format!("tmp{t}[{slots}]")).collect();
    if !decls.is_empty() {
        writeln!(b, "        float {};", decls.join(", ")).unwrap();
    }
    let scalar = super::scalar_spelling(Dialect::Cuda);
    // Per-element values are arrays indexed by the slot; per-row values stay scalars.
    let slot_tmp = |t: usize| if arrays.contains(&t) { format!("tmp{t}[s]") } else { format!("tmp{t}") };
    let slot = Spelling { dialect: Dialect::Cuda, tmp: &slot_tmp, index: &|i| i.to_c() };
    // Slots past the row's end exist only when the threads' slots overrun it.
    let (open, close, body_indent) = if exact {
        (String::new(), String::new(), "            ")
    } else {
        (format!("            if (r < {row_len}) {{\n"), "            }\n".to_string(), "                ")
    };
    let slot_r = format!("(s / {vec}) * {} + {lane} * {vec} + s % {vec}", threads * vec);
    let chunk_r = format!("c * {} + {lane} * {vec}", threads * vec);
    // The loop over a thread's chunks of `vec` neighbouring elements, around `lines` (none: no loop).
    let chunk_loop = |lines: &[String]| -> String {
        if lines.is_empty() {
            return String::new();
        }
        let mut out = format!("        #pragma unroll\n        for (int c = 0; c < {}; c++) {{\n", slots / vec);
        out.push_str(&format!("            const {ty} r = {chunk_r};\n{open}"));
        for line in lines {
            out.push_str(&format!("{body_indent}{line}\n"));
        }
        out.push_str(&format!("{close}        }}\n"));
        out
    };
    let mut computed: Vec<usize> = Vec::new();
    for phase in phases {
        match phase {
            Phase::Row(stmts) => {
                for s in stmts {
                    let line = scalar.stmt(k, s, true);
                    let line = if matches!(s, Stmt::Store { .. }) { format!("if ({lane} == 0) {line}") } else { line };
                    writeln!(b, "        {line}").unwrap();
                }
            }
            Phase::Loop { stmts, reductions } => {
                let fresh = |t: &usize| !computed.contains(t);
                let vector_loads: Vec<&Stmt> = stmts
                    .iter()
                    .filter(|s| {
                        matches!(s, Stmt::Load { tmp, arg, index } if fresh(tmp) && class_of(*arg, index) == Access::Vector)
                    })
                    .collect();
                let per_slot: Vec<&Stmt> = stmts
                    .iter()
                    .filter(|s| match s {
                        Stmt::Load { tmp, arg, index } => fresh(tmp) && class_of(*arg, index) != Access::Vector,
                        Stmt::Compute { tmp, .. } => fresh(tmp),
                        Stmt::Store { arg, index, .. } => class_of(*arg, index) != Access::Vector,
                    })
                    .collect();
                let vector_stores: Vec<&Stmt> = stmts
                    .iter()
                    .filter(|s| matches!(s, Stmt::Store { arg, index, .. } if class_of(*arg, index) == Access::Vector))
                    .collect();
                for r in reductions {
                    writeln!(b, "        float tmp{} = {};", r.tmp, identity(r.combine, Dialect::Cuda)).unwrap();
                }
                let loads: Vec<String> = vector_loads
                    .iter()
                    .flat_map(|s| {
                        let Stmt::Load { tmp, arg, index } = s else { unreachable!("filtered to loads") };
                        let (ptr, idx, dtype) = (&k.args[*arg].name, index.to_c(), k.args[*arg].dtype);
                        let dst = |j: usize| format!("tmp{tmp}[c * {vec} + {j}]");
                        let scalars: Vec<String> = (0..vec)
                            .map(|j| format!("{} = {};", dst(j), widen(dtype, &format!("{ptr}[{idx} + {j}]"))))
                            .collect();
                        let array = format!("tmp{tmp} + c * {vec}");
                        [
                            format!("if (aligned) {}", load_vec(ptr, &idx, dtype, vec, &array, dst)),
                            format!("else {{ {} }}", scalars.join(" ")),
                        ]
                    })
                    .collect();
                b.push_str(&chunk_loop(&loads));
                if !per_slot.is_empty() || !reductions.is_empty() {
                    b.push_str("        #pragma unroll\n");
                    writeln!(b, "        for (int s = 0; s < {slots}; s++) {{").unwrap();
                    let uses_r = per_slot.iter().any(|s| matches!(s, Stmt::Load { .. } | Stmt::Store { .. }));
                    if uses_r || !exact {
                        writeln!(b, "            const {ty} r = {slot_r};").unwrap();
                    }
                    b.push_str(&open);
                    for s in &per_slot {
                        writeln!(b, "{body_indent}{}", slot.stmt(k, s, false)).unwrap();
                    }
                    for Reduce { tmp, combine, value } in reductions {
                        let acc = format!("tmp{tmp}");
                        writeln!(b, "{body_indent}{acc} = {};", combine_expr(*combine, &acc, &slot.value(value)))
                            .unwrap();
                    }
                    b.push_str(&close);
                    b.push_str("        }\n");
                }
                let stores: Vec<String> = vector_stores
                    .iter()
                    .flat_map(|s| {
                        let Stmt::Store { arg, index, value } = s else { unreachable!("filtered to stores") };
                        let (ptr, idx, dtype) = (&k.args[*arg].name, index.to_c(), k.args[*arg].dtype);
                        let src = |j: usize| match value {
                            Value::Tmp(t) => format!("tmp{t}[c * {vec} + {j}]"),
                            Value::Constant(c) => super::constant(*c, Dialect::Cuda),
                        };
                        let scalars: Vec<String> = (0..vec)
                            .map(|j| format!("{ptr}[{idx} + {j}] = {};", super::narrow(dtype, &src(j))))
                            .collect();
                        // A constant stored into a 16-bit buffer goes element by element.
                        let vector = match value {
                            Value::Tmp(t) => store_vec(ptr, &idx, dtype, vec, &format!("tmp{t} + c * {vec}"), src),
                            Value::Constant(_) if dtype == DType::F32 => store_vec(ptr, &idx, dtype, vec, "", src),
                            Value::Constant(_) => format!("{{ {} }}", scalars.join(" ")),
                        };
                        [format!("if (aligned) {vector}"), format!("else {{ {} }}", scalars.join(" "))]
                    })
                    .collect();
                b.push_str(&chunk_loop(&stores));
                for r in reductions {
                    writeln!(b, "        {}", combine_row(r.tmp, r.combine)).unwrap();
                }
                for s in stmts {
                    if let Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } = s {
                        computed.push(*tmp);
                    }
                }
            }
        }
    }
    b.push_str("    }\n");
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::fx::proxy::Tracer;
    use crate::inductor::index::{Affine, Term};
    use crate::inductor::{Config, generate};
    use crate::tensor::{Tensor, TensorMeta};

    fn index(terms: Vec<Term>, offset: usize) -> FlatIndex {
        FlatIndex { offset, terms }
    }

    #[test]
    fn accesses_are_classified_for_four_lanes() {
        let x = |div, modulo, coeff| Term { var: Var::X, div, modulo, coeff };
        let f32 = DType::F32;
        assert_eq!(access(&index(vec![x(1, None, 1)], 0), Var::X, 4, f32), Access::Vector);
        assert_eq!(access(&index(vec![x(1, Some(32), 1)], 0), Var::X, 4, f32), Access::Vector);
        assert_eq!(access(&index(vec![x(1, Some(6), 1)], 0), Var::X, 4, f32), Access::Gather);
        assert_eq!(access(&index(vec![x(32, None, 1)], 0), Var::X, 4, f32), Access::Uniform);
        assert_eq!(access(&index(vec![x(1, None, 1)], 2), Var::X, 4, f32), Access::Gather);
        assert_eq!(access(&index(vec![x(1, None, 3)], 0), Var::X, 4, f32), Access::Gather);
        let row = FlatIndex::new(&Affine { offset: 0, coeffs: vec![64, 1] }, &[8, 64], Some(1));
        assert_eq!(access(&row, Var::R, 4, f32), Access::Vector);
        // Eight lanes need offsets of eight; four 8-bit floats are one 32-bit word.
        assert_eq!(access(&index(vec![x(1, None, 1)], 4), Var::X, 8, DType::BF16), Access::Gather);
        assert_eq!(access(&index(vec![x(1, Some(24), 1)], 0), Var::X, 8, DType::BF16), Access::Vector);
        assert_eq!(access(&index(vec![x(1, None, 1)], 0), Var::X, 4, DType::F8E4M3), Access::Vector);
        assert_eq!(access(&index(vec![x(1, None, 1)], 2), Var::X, 4, DType::F8E5M2), Access::Gather);
        assert_eq!(access(&index(vec![x(1, None, 1)], 0), Var::X, 8, DType::F8E4M3), Access::Gather);
    }

    #[test]
    fn the_prelude_defines_each_reduction_helper() {
        let prelude = prelude();
        for helper in ["warp_sum(float v)", "block_sum(float v, float* smem)", "warp_max(float v)", "block_max("] {
            assert!(prelude.contains(helper), "{helper} missing from:\n{prelude}");
        }
        assert!(prelude.contains("v = maximum(v, __shfl_xor_sync(0xffffffffu, v, offset));"), "{prelude}");
        assert!(prelude.contains(": __int_as_float(0xff800000);"), "{prelude}");
    }

    #[test]
    fn persistent_rows_split_evenly() {
        let split = |threads, rows_per_block, slots| RowSplit { threads, rows_per_block, slots };
        // Rows up to 512 go one to a warp, four to a block of 128 threads.
        assert_eq!(persistent_shape(512, 8), split(32, 4, 16));
        assert_eq!(persistent_shape(768, 8), split(96, 1, 8));
        assert_eq!(persistent_shape(700, 4), split(96, 1, 8));
        assert_eq!(persistent_shape(8, 4), split(32, 4, 4));
        assert_eq!(persistent_shape(7, 1), split(32, 4, 1));
        // Longer rows take a block each, in whole warps.
        assert_eq!(persistent_shape(769, 1), split(128, 1, 7));
        assert_eq!(persistent_shape(1024, 4), split(128, 1, 8));
        assert_eq!(persistent_shape(4096, 4), split(512, 1, 8));
        assert_eq!(persistent_shape(1025, 1), split(160, 1, 7));
    }

    /// The CUDA output code of `f` on `cuda:0` inputs of the given shapes and strides, traced
    /// from metadata alone: an input of 2^31 elements costs no memory, and printing CUDA C needs
    /// no GPU.
    fn cuda_code(inputs: &[(&[usize], &[usize])], f: impl Fn(&[Tensor]) -> crate::Result<Tensor>) -> String {
        let tracer = Tracer::new();
        let xs: Vec<Tensor> = inputs
            .iter()
            .enumerate()
            .map(|(i, (shape, strides))| {
                let meta = TensorMeta { shape: shape.to_vec(), dtype: DType::F32, device: Device::Cuda(0) };
                tracer.placeholder(&format!("x{i}"), meta, strides.to_vec())
            })
            .collect();
        let graph = tracer.finish(&[f(&xs).unwrap()]).unwrap().graph;
        generate(&graph, Device::Cuda(0), &Config::default()).unwrap().to_string()
    }

    /// A kernel indexes in `int` until a buffer it reads or writes reaches [`INT_INDEX_LIMIT`]
    /// elements, whether the buffer is as large as the loop (a ReLU over every element) or a
    /// strided input read at two elements far apart.
    #[test]
    fn indices_take_32_bits_until_a_buffer_is_too_large_for_them() {
        for (shape, strides, ty) in [
            ([6144], [1], "int"),
            ([INT_INDEX_LIMIT - 1], [1], "int"),
            ([INT_INDEX_LIMIT], [1], "long long"),
            ([2], [INT_INDEX_LIMIT - 1], "long long"),
        ] {
            let code = cuda_code(&[(&shape, &strides)], |x| x[0].relu());
            assert!(code.contains(&format!("    for ({ty} x0 = 4 * (blockIdx.x * ({ty})blockDim.x")), "{ty}:\n{code}");
            assert_eq!(wide_indices(&code), ty == "long long", "{code}");
        }
        // A broadcast bias read `% 3072`, and reductions (a warp per row, one thread per
        // column), in 32 bits throughout.
        let code = cuda_code(&[(&[2048, 3072], &[3072, 1]), (&[3072], &[1])], |x| x[0].add(&x[1])?.gelu());
        assert!(code.contains("x0 % 3072") && !wide_indices(&code), "{code}");
        let code = cuda_code(&[(&[64, 512], &[512, 1])], |x| x[0].softmax(-1)?.sum(0, false));
        assert!(code.contains("for (int x = ") && code.contains("const int r = ") && !wide_indices(&code), "{code}");
    }

    /// Whether generated code declares anything `long long` but a pointer's address in an
    /// alignment check and the 64-bit extent a 32-bit kernel narrows.
    fn wide_indices(code: &str) -> bool {
        code.replace("unsigned long long", "").replace("long long xnumel64", "").contains("long long")
    }

    /// Every launch a kernel may get ([`launch_candidates`]) steps its loop over `x` by at most
    /// 2^28 on a GPU of 4096 multiprocessors: the room [`INT_INDEX_LIMIT`] leaves below 2^31.
    #[test]
    fn the_int_margin_covers_every_grid_stride() {
        type Model = fn(&Tensor) -> crate::Result<Tensor>;
        let cases: [(&[usize], Model); 5] = [
            (&[1 << 20], |x| x.relu()),
            (&[64, 512], |x| x.softmax(-1)),
            (&[8, 4096], |x| x.softmax(-1)),
            (&[4, 20000], |x| x.softmax(-1)),
            (&[300, 7], |x| x.sum(0, false)),
        ];
        let mut kinds = Vec::new();
        for (shape, f) in cases {
            let x = Tensor::randn(shape, 0);
            let graph = crate::fx::trace(std::slice::from_ref(&x), |t| Ok(vec![f(&t[0])?])).unwrap().graph;
            for k in crate::inductor::kernels(&graph, &Config::default()).unwrap() {
                kinds.push(k.name.split('_').next().unwrap().to_string());
                for l in launch_candidates(&k) {
                    let per_block = match l.grid {
                        Grid::Elements { per_block } => per_block as usize,
                        Grid::Rows => 1,
                    };
                    let step = l.grid_size(usize::MAX / 2, 4096) as usize * per_block;
                    assert!(step <= 1 << 28, "{}: {l:?} steps by {step}", k.name);
                }
            }
        }
        // Pointwise, one warp and one block per row, a looped row, and a strided reduction.
        for kind in ["poi", "per", "red"] {
            assert!(kinds.iter().any(|k| k == kind), "{kinds:?}");
        }
        // The largest step: eight elements a thread over 16-bit buffers.
        let half = Launch { block: THREADS, grid: Grid::Elements { per_block: THREADS * 2 * VEC as u32 } };
        assert_eq!(half.grid_size(usize::MAX / 2, 4096) as usize * (THREADS as usize * 2 * VEC), 1 << 28);
    }

    #[test]
    fn grids_cover_the_work_up_to_a_cap() {
        let l = Launch { block: 256, grid: Grid::Elements { per_block: 1024 } };
        assert_eq!(l.grid_size(1 << 24, 132), 132 * 8 * 4);
        assert_eq!(l.grid_size(1000, 132), 1);
        assert_eq!(Launch { block: 512, grid: Grid::Rows }.grid_size(4096, 132), 2112);
    }
}
