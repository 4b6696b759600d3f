//! The C printer, the analogue of TorchInductor's `codegen/cpp.py`: each kernel becomes a C
//! function `void name_range(float* const* args, int64_t x0, int64_t x1)` whose loop over `x`
//! the compiler vectorises (`#pragma omp simd`, the vector math in the prelude instead of libm),
//! and `void name(float* const* args, int64_t xnumel)`, the whole range: the entry point every
//! CPU kernel has, replacement printers' included.
//!
//! The runtime calls `name_range` on chunks of `x` from the engine's thread pool, the pool matrix
//! products and eager kernels use, rather than from an OpenMP team: two pools of threads on the
//! same cores keep waking each other's sleepers and fighting for the cores between steps.
//!
//! A pointwise kernel whose indices divide `x` or take a modulus of it (a bias broadcast over
//! rows reads `in_ptr1[x % 2048]`, a per-row value `in_ptr1[x / 2048]`) loops over rows and
//! columns instead, `x = row * 2048 + col`, as Inductor's C++ backend tiles its loops: the bias
//! is read at `col`, contiguously, and the per-row value at `row`, once per row. In the flat
//! loop each lane computes the division, and GCC cannot vectorize a division by a number that is
//! no power of two: the whole loop runs scalar. The range `x0..x1` may start and end inside a
//! row; the first and last rows run only their part.
//!
//! Reductions run each row's phases in order: every loop over `r` re-reads the row, which the
//! CPU's caches keep close, so `per_` and `red_` kernels print alike here. A vector-math value a
//! later loop would compute again (softmax's `exp`) is kept instead, in a buffer of the row on the
//! stack (`tmpN_row`): one `exp` an element instead of two. A bf16 row a loop stores whole goes
//! into a row buffer of floats too (`out_ptr0_row`), rounded after the loop by `floats_to_bf16`,
//! which uses the CPU's bf16 rounding instruction where it has one.
//!
//! A loop whose body is one long chain of dependent instructions computes [`GROUPS`] groups of
//! elements side by side, statement by statement (the groups' temporaries are `tmpN_0` to
//! `tmpN_3`). A vector-math call is tens of dependent instructions, two in a row are a chain too
//! long for the core to overlap one iteration with the next, and a reduction's accumulator is
//! one chain through the whole loop; a core overlaps independent chains. Chains of two or more
//! vector-math calls gain from the groups, a single call does not (bench/NOTES-cpu.md, "Generated
//! C that vectorizes and overlaps its chains").
//!
//! A reduction over an outer dimension (a bias's gradient, summed over the batch) has rows that
//! are strided: walking one would read one float per cache line. Such a kernel takes its rows
//! [`COLUMN_BLOCK`] at a time instead, side by side: for each `r`, the block's neighbouring `x`
//! are contiguous in memory and one vectorized loop goes through them, each with its own
//! accumulator (Inductor's C++ backend reorders these loops the same way).

use std::collections::HashMap;
use std::fmt::Write;

use super::{Dialect, Spelling, c_type, combine_expr, helper_functions, identity, scalar_spelling};
use crate::device::cpu::vecmath;
use crate::dtype::DType;
use crate::inductor::index::{FlatIndex, Term, Var};
use crate::inductor::ir::PointwiseOp;
use crate::inductor::kernel::{Combine, Kernel, KernelBody, Part, Phase, Reduce, Stmt, Value};

/// The suffix of the entry point that computes `x` in `x0..x1` only.
pub const RANGE_SUFFIX: &str = "_range";

/// Groups of elements a loop of long dependency chains computes side by side.
pub const GROUPS: usize = 4;

/// Dependent vector-math calls from which a loop is a long chain.
pub const LONG_CHAIN: usize = 2;

/// Most bytes of row buffers (`tmpN_row`) a kernel keeps on its thread's stack; past it, values
/// are computed again.
pub const MAX_ROW_BUFFER_BYTES: usize = 64 << 10;

/// Shortest row whose loops are split into groups, a reduction's or a tiled pointwise kernel's.
/// Each group then runs at least 64 iterations, whole vectors but for a few: more than GCC ever
/// unrolls completely before vectorising (GCC 12 miscompiles a completely unrolled row loop
/// holding a max reduction, see [`row_loop`]), and few enough left over that the groups pay.
pub const MIN_GROUPED_ROW: usize = 256;

/// Shortest row, when its length is a power of two, by which a pointwise loop is tiled (see
/// [`row_tile`]): a shorter row fills no vector, and is faster read with gathers.
pub const MIN_TILE: usize = 8;

/// Rows a reduction over an outer dimension computes side by side (see [`columns`]): 64
/// neighbouring floats, four cache lines per read, and 256 bytes of each per-row value on the
/// stack.
pub const COLUMN_BLOCK: usize = 64;

/// The header every C kernel file starts with: the NaN-propagating `maximum` (declared as an
/// OpenMP reduction, so that loops reducing with it vectorize) and the vector math (`vm_exp`,
/// `vm_tanh`, ...) that kernels call instead of libm.
pub fn prelude() -> String {
    format!(
        "#include <math.h>\n#include <stdint.h>\n\n{}{}{}{}",
        DTYPES,
        helper_functions("static inline"),
        "#pragma omp declare reduction(maximum : float : omp_out = maximum(omp_out, omp_in)) \
         initializer(omp_priv = -INFINITY)\n",
        vecmath::c_source()
    )
}

/// A whole C source file: the prelude, then every kernel.
pub fn module(kernels: &[Kernel]) -> String {
    crate::wires::trip(crate::wires::Wire::CModule);
    let mut out = prelude();
    for k in kernels {
        out.push('\n');
        out.push_str(&kernel(k));
    }
    out
}

/// The element types generated C stores, and their conversions to and from the float every
/// kernel computes in: bf16 as the top half of a float (widening is a shift; rounding adds just
/// under half of the dropped part, ties to even), f16 as the compiler's `_Float16` (converted by
/// F16C's instructions where `-march=native` has them), the 8-bit floats as PyTorch converts
/// them. Written without branches, so that GCC vectorises the loops they sit in.
const DTYPES: &str = r#"typedef uint16_t bf16;
typedef uint8_t f8e4m3;
typedef uint8_t f8e5m2;
static inline float bf16_to_float(bf16 v) { union { uint32_t u; float f; } x = { (uint32_t)v << 16 }; return x.f; }
static inline bf16 float_to_bf16(float f) {
    union { float f; uint32_t u; } x = { f };
    return f != f ? (bf16)((x.u >> 16) | 0x40u) : (bf16)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16);
}
/* A row of floats rounded into bf16, where a kernel stores a whole row: AVX-512 BF16's
   vcvtneps2bf16 rounds sixteen at a time (to nearest even; it flushes subnormals to zero, as the
   eager kernels' rounding does on such a CPU), in place of the ten-odd integer instructions of
   float_to_bf16 and the shuffles that pack their results. Elsewhere, float_to_bf16 in a loop. */
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
static inline void floats_to_bf16(bf16* restrict dst, const float* restrict src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 lanes = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m256i rounded = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes, src + i));
        _mm256_mask_storeu_epi16(dst + i, lanes, rounded);
    }
}
#else
static inline void floats_to_bf16(bf16* restrict dst, const float* restrict src, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
}
#endif
#ifdef __FLT16_MAX__
typedef _Float16 f16;
static inline float f16_to_float(f16 v) { return (float)v; }
static inline f16 float_to_f16(float f) { return (f16)f; }
#endif
static inline float minifloat_to_float(uint32_t m, int mantissa, int bias) {
    int e = (int)(m >> mantissa);
    float f = (float)(m & ((1u << mantissa) - 1)) / (float)(1 << mantissa);
    return e == 0 ? ldexpf(f, 1 - bias) : ldexpf(1.0f + f, e - bias);
}
static inline uint32_t float_to_minifloat(float f, int mantissa, int bias, float max, uint32_t overflow) {
    float a = fabsf(f);
    if (a != a) return 0x7fu;
    if (a > 3.0e38f) return overflow;
    int exponent = a == 0.0f ? 1 - bias : (ilogbf(a) > 1 - bias ? ilogbf(a) : 1 - bias);
    float step = ldexpf(1.0f, exponent - mantissa);
    float rounded = rintf(a / step) * step;
    if (rounded > max) return overflow;
    if (rounded == 0.0f) return 0;
    int e = ilogbf(rounded);
    if (e < 1 - bias) return (uint32_t)(rounded / ldexpf(1.0f, 1 - bias - mantissa));
    return ((uint32_t)(e + bias) << mantissa) | (uint32_t)((rounded / ldexpf(1.0f, e) - 1.0f) * (float)(1 << mantissa));
}
#ifndef __FLT16_MAX__
/* A compiler without _Float16: f16 as its bits, converted in software. */
typedef uint16_t f16;
static inline float f16_to_float(f16 h) {
    float m = ((h >> 10) & 0x1fu) == 0x1fu ? ((h & 0x3ffu) ? NAN : INFINITY) : minifloat_to_float(h & 0x7fffu, 10, 15);
    return (h & 0x8000u) ? -m : m;
}
static inline f16 float_to_f16(float f) {
    uint32_t m = f != f ? 0x7e00u : float_to_minifloat(f, 10, 15, 65504.0f, fabsf(f) >= 65520.0f ? 0x7c00u : 0x7bffu);
    return (f16)((signbit(f) ? 0x8000u : 0u) | m);
}
#endif
static inline float f8e4m3_to_float(f8e4m3 v) {
    float m = (v & 0x7f) == 0x7f ? NAN : minifloat_to_float(v & 0x7fu, 3, 7);
    return (v & 0x80) ? -m : m;
}
static inline f8e4m3 float_to_f8e4m3(float f) {
    return (f8e4m3)((signbit(f) ? 0x80u : 0u) | float_to_minifloat(f, 3, 7, 448.0f, 0x7fu));
}
static inline float f8e5m2_to_float(f8e5m2 v) {
    uint32_t m = v & 0x7fu;
    float x = m == 0x7cu ? INFINITY : m > 0x7cu ? NAN : minifloat_to_float(m, 2, 15);
    return (v & 0x80) ? -x : x;
}
static inline f8e5m2 float_to_f8e5m2(float f) {
    uint32_t overflow = fabsf(f) >= 61440.0f ? 0x7cu : 0x7bu;
    return (f8e5m2)((signbit(f) ? 0x80u : 0u) | float_to_minifloat(f, 2, 15, 57344.0f, overflow));
}

"#;

// ANCHOR: c_kernel
/// One kernel as two C functions: over a range of `x`, and over all of it. Every argument
/// arrives as a `float*` (the one signature all kernels share) and is read as its buffer's
/// element type.
pub fn kernel(k: &Kernel) -> String {
    crate::wires::trip(crate::wires::Wire::CKernel);
    let mut out = format!("void {}{RANGE_SUFFIX}(float* const* args, int64_t x0, int64_t x1) {{\n", k.name);
    for (i, arg) in k.args.iter().enumerate() {
        let constness = if arg.output { "" } else { "const " };
        let ty = c_type(arg.dtype);
        let cast = if ty == "float" { String::new() } else { format!("({constness}{ty}*)") };
        writeln!(out, "    {constness}{ty}* restrict {} = {cast}args[{i}];", arg.name).unwrap();
    }
    match &k.body {
        KernelBody::Pointwise(stmts) => out.push_str(&pointwise(k, &LoopBody::all(stmts), ("x0", "x1"), "    ")),
        KernelBody::Foreach(parts) => out.push_str(&foreach(k, parts)),
        KernelBody::Reduction { row_len, phases, innermost: true, .. } => out.push_str(&rows(k, *row_len, phases)),
        KernelBody::Reduction { row_len, phases, innermost: false, .. } => out.push_str(&columns(k, *row_len, phases)),
    }
    out.push_str("}\n");
    let name = &k.name;
    writeln!(out, "void {name}(float* const* args, int64_t xnumel) {{ {name}{RANGE_SUFFIX}(args, 0, xnumel); }}")
        .unwrap();
    out
}
// ANCHOR_END: c_kernel

/// The loop of a pointwise kernel over `bounds` (`x0..x1`), at `indent`: over `x` itself, or,
/// when [`row_tile`] finds a row length, over those rows and the columns of each that lie in the
/// range.
fn pointwise(k: &Kernel, body: &LoopBody, (x0, x1): (&str, &str), indent: &str) -> String {
    let long = vector_math_chain(body) >= LONG_CHAIN;
    let Some(tile) = row_tile(body, long) else {
        return range_loop(k, body, Counter::X, long, (x0, x1), indent);
    };
    let mut out = String::new();
    writeln!(out, "{indent}// x = row * {tile} + col: a row at a time, so that no index divides x.").unwrap();
    writeln!(out, "{indent}for (int64_t row = {x0} / {tile}; row * {tile} < {x1}; row++) {{").unwrap();
    writeln!(out, "{indent}    const int64_t start = row * {tile};").unwrap();
    // The range may start and end inside a row.
    writeln!(out, "{indent}    const int64_t col0 = {x0} > start ? {x0} - start : 0;").unwrap();
    writeln!(out, "{indent}    const int64_t col1 = {x1} - start < {tile} ? {x1} - start : {tile};").unwrap();
    let grouped = long && tile >= MIN_GROUPED_ROW;
    out.push_str(&range_loop(k, body, Counter::Col { tile }, grouped, ("col0", "col1"), &format!("{indent}    ")));
    writeln!(out, "{indent}}}").unwrap();
    out
}

/// The loops of a foreach kernel over `x0..x1`: the kernel's `x` covers its parts end to end, so
/// each part runs the stretch of the range that falls in its own, counted from its own start.
fn foreach(k: &Kernel, parts: &[Part]) -> String {
    let mut out = String::new();
    let mut start = 0;
    for (i, part) in parts.iter().enumerate() {
        let (end, n) = (start + part.xnumel, part.xnumel);
        writeln!(
            out,
            "    // loop {} of {}: x in {start}..{end} of the kernel, x in 0..{n} of the loop",
            i + 1,
            parts.len()
        )
        .unwrap();
        writeln!(out, "    if (x0 < {end} && x1 > {start}) {{").unwrap();
        if start == 0 {
            writeln!(out, "        const int64_t from = x0, to = x1 < {end} ? x1 : {end};").unwrap();
        } else {
            writeln!(out, "        const int64_t from = x0 > {start} ? x0 - {start} : 0;").unwrap();
            writeln!(out, "        const int64_t to = x1 < {end} ? x1 - {start} : {n};").unwrap();
        }
        out.push_str(&pointwise(k, &LoopBody::all(&part.stmts), ("from", "to"), "        "));
        out.push_str("    }\n");
        start = end;
    }
    out
}

/// The row length by which a pointwise loop over `x` is tiled, if any: the shortest block of
/// `x` (see [`FlatIndex::x_block`]) an index divides or takes a modulus by, so that every index
/// reads at the row and the column instead.
///
/// With `C` no power of two, `x % C` is a division GCC cannot vectorize, so the flat loop runs
/// scalar and the tiled one wins by far. With `C` a power of two it is a mask and the flat loop
/// vectorizes with gathers, so tiling wins less, and a row shorter than [`MIN_TILE`] fills no
/// vector. A loop of long chains (two `tanh`) beats the flat loop's groups only with each row in
/// groups too, from [`MIN_GROUPED_ROW`] on; shorter rows of a power of two stay flat. The
/// measurements are in bench/NOTES-cpu.md ("Pointwise loops over rows, not over `x`").
fn row_tile(body: &LoopBody, long: bool) -> Option<usize> {
    let tile = body
        .stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Load { index, .. } | Stmt::Store { index, .. } => index.x_block(),
            Stmt::Compute { .. } => None,
        })
        .min()?;
    let shortest = if long { MIN_GROUPED_ROW } else { MIN_TILE };
    (tile >= shortest || !tile.is_power_of_two()).then_some(tile)
}

/// A vectorized loop of `body` over `counter` from `bounds.0` to `bounds.1`, at `indent`:
/// one loop, or, when `grouped` (the body is a long chain of vector-math calls), [`GROUPS`]
/// equal parts of the range side by side, then the few elements left over.
fn range_loop(
    k: &Kernel,
    body: &LoopBody,
    counter: Counter,
    grouped: bool,
    bounds: (&str, &str),
    indent: &str,
) -> String {
    let (var, (start, end)) = (counter.name(), bounds);
    let inner = format!("{indent}    ");
    let mut out = String::new();
    if !grouped {
        writeln!(out, "{indent}#pragma omp simd\n{indent}for (int64_t {var} = {start}; {var} < {end}; {var}++) {{")
            .unwrap();
        out.push_str(&statements(k, body, counter, &inner));
        writeln!(out, "{indent}}}").unwrap();
        return out;
    }
    writeln!(out, "{indent}// {GROUPS} parts of the range side by side, so that the core overlaps their chains of")
        .unwrap();
    writeln!(out, "{indent}// dependent instructions; then the few elements left.").unwrap();
    writeln!(out, "{indent}const int64_t part = ({end} - {start}) / {GROUPS};").unwrap();
    writeln!(
        out,
        "{indent}#pragma omp simd\n{indent}for (int64_t {var} = {start}; {var} < {start} + part; {var}++) {{"
    )
    .unwrap();
    let offset = |g: usize| if g == 1 { "part".to_string() } else { format!("{g} * part") };
    writeln!(out, "{inner}{};", group_positions(counter, offset)).unwrap();
    out.push_str(&grouped_statements(k, body, counter, &inner));
    writeln!(out, "{indent}}}").unwrap();
    // Vector code for the few elements left would only cost compile time.
    writeln!(out, "{indent}#pragma omp simd simdlen(1)").unwrap();
    writeln!(out, "{indent}for (int64_t {var} = {start} + {GROUPS} * part; {var} < {end}; {var}++) {{").unwrap();
    out.push_str(&statements(k, body, counter, &inner));
    writeln!(out, "{indent}}}").unwrap();
    out
}

/// The loop over rows `x0..x1`, each row's phases in order, with the row buffers of
/// [`kept_values`] and [`rounded_rows`] declared first.
fn rows(k: &Kernel, row_len: usize, phases: &[Phase]) -> String {
    let indent = "        ";
    let mut out = String::from("    for (int64_t x = x0; x < x1; x++) {\n");
    let kept = kept_values(row_len, phases);
    if !kept.is_empty() {
        writeln!(out, "{indent}// Computed by one loop, read by a later one.").unwrap();
        let buffers: Vec<String> = kept.iter().map(|t| format!("tmp{t}_row[{row_len}]")).collect();
        writeln!(out, "{indent}float {};", buffers.join(", ")).unwrap();
    }
    let rounded = rounded_rows(k, row_len, phases, kept.len());
    if !rounded.is_empty() {
        writeln!(out, "{indent}// A row of bf16 results, rounded once the loop has computed it.").unwrap();
        let buffers: Vec<String> = rounded.iter().map(|&a| format!("{}_row[{row_len}]", k.args[a].name)).collect();
        writeln!(out, "{indent}float {};", buffers.join(", ")).unwrap();
    }
    let mut stored: Vec<usize> = Vec::new();
    for phase in phases {
        match phase {
            Phase::Row(stmts) => out.push_str(&statements(k, &LoopBody::all(stmts), Counter::X, indent)),
            Phase::Loop { stmts, reductions } => {
                let body = LoopBody::new(stmts, reductions, &kept, &stored, &rounded);
                stored.extend(&body.write);
                out.push_str(&row_loop(k, row_len, &body, reductions, indent));
                for arg in body.rounded_stores() {
                    let name = &k.args[arg].name;
                    writeln!(out, "{indent}floats_to_bf16({name} + x * {row_len}, {name}_row, {row_len});").unwrap();
                }
            }
        }
    }
    out.push_str("    }\n");
    out
}

/// The rows `x0..x1` of a reduction over an outer dimension, [`COLUMN_BLOCK`] at a time: every
/// per-row value is an array over the block (`tmpN[j]` for row `x = xb + j`), and each loop over
/// `r` runs the block's rows side by side in a vectorized loop over `j`, reading neighbouring
/// memory.
fn columns(k: &Kernel, row_len: usize, phases: &[Phase]) -> String {
    let per_row: Vec<usize> = phases
        .iter()
        .flat_map(|p| match p {
            Phase::Row(stmts) => defined(stmts),
            Phase::Loop { reductions, .. } => reductions.iter().map(|r| r.tmp).collect(),
        })
        .collect();
    let tmp = |t: usize| if per_row.contains(&t) { format!("tmp{t}[j]") } else { format!("tmp{t}") };
    let spell = Spelling { dialect: Dialect::C, tmp: &tmp, index: &|i: &FlatIndex| i.to_c() };
    // Per-row values are declared with the block; values of one element where they are computed.
    let line = |s: &Stmt| {
        let declare = matches!(s, Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } if !per_row.contains(tmp));
        spell.stmt(k, s, declare)
    };
    let b = COLUMN_BLOCK;
    let mut out = format!("    // {b} rows side by side: along r they are neighbours in memory.\n");
    writeln!(out, "    for (int64_t xb = x0; xb < x1; xb += {b}) {{").unwrap();
    writeln!(out, "        const int64_t nb = x1 - xb < {b} ? x1 - xb : {b};").unwrap();
    if !per_row.is_empty() {
        let arrays: Vec<String> = per_row.iter().map(|t| format!("tmp{t}[{b}]")).collect();
        writeln!(out, "        float {};", arrays.join(", ")).unwrap();
    }
    for phase in phases {
        match phase {
            Phase::Row(stmts) => {
                out.push_str("        for (int64_t j = 0; j < nb; j++) {\n            const int64_t x = xb + j;\n");
                for s in stmts {
                    writeln!(out, "            {}", line(s)).unwrap();
                }
                out.push_str("        }\n");
            }
            Phase::Loop { stmts, reductions } => {
                for r in reductions {
                    let start = identity(r.combine, Dialect::C);
                    writeln!(out, "        for (int64_t j = 0; j < nb; j++) tmp{}[j] = {start};", r.tmp).unwrap();
                }
                writeln!(out, "        for (int64_t r = 0; r < {row_len}; r++) {{").unwrap();
                out.push_str("            #pragma omp simd\n            for (int64_t j = 0; j < nb; j++) {\n");
                out.push_str("                const int64_t x = xb + j;\n");
                for s in stmts {
                    writeln!(out, "                {}", line(s)).unwrap();
                }
                for r in reductions {
                    let acc = format!("tmp{}[j]", r.tmp);
                    writeln!(out, "                {acc} = {};", combine_expr(r.combine, &acc, &spell.value(&r.value)))
                        .unwrap();
                }
                out.push_str("            }\n        }\n");
            }
        }
    }
    out.push_str("    }\n");
    out
}

/// The vector-math values of a row's loops that a later loop defines again, as many as
/// [`MAX_ROW_BUFFER_BYTES`] of row buffers hold: the first loop stores them, later ones read
/// them back. Values of a few instructions (a subtraction) are computed again, as the kernel IR
/// has them (the naive softmax's gain is in bench/NOTES-cpu.md).
fn kept_values(row_len: usize, phases: &[Phase]) -> Vec<usize> {
    let loops: Vec<&[Stmt]> = phases
        .iter()
        .filter_map(|p| match p {
            Phase::Loop { stmts, .. } => Some(stmts.as_slice()),
            Phase::Row(_) => None,
        })
        .collect();
    let mut kept: Vec<usize> = Vec::new();
    for (i, stmts) in loops.iter().enumerate() {
        for s in *stmts {
            if let Stmt::Compute { tmp, op, .. } = s
                && is_vector_math(op)
                && !kept.contains(tmp)
                && loops[i + 1..].iter().any(|later| defined(later).contains(tmp))
            {
                kept.push(*tmp);
            }
        }
    }
    kept.truncate(MAX_ROW_BUFFER_BYTES / (row_len.max(1) * size_of::<f32>()));
    kept
}

/// The bf16 arguments whose rows a row loop stores whole (at `x * row_len + r`) and the kernel
/// never reads: their values go into a row buffer of floats, rounded by `floats_to_bf16` after
/// the loop, as many as fit beside `kept` row buffers in [`MAX_ROW_BUFFER_BYTES`]. Rounding a
/// row at a time lets the CPU's bf16 instruction do it where there is one; rounding in the loop
/// took most of a bf16 layer norm's time (bench/NOTES-precision.md, "CPU bf16 kernels").
fn rounded_rows(k: &Kernel, row_len: usize, phases: &[Phase], kept: usize) -> Vec<usize> {
    let whole_row = FlatIndex {
        offset: 0,
        terms: vec![
            Term { var: Var::R, div: 1, modulo: None, coeff: 1 },
            Term { var: Var::X, div: 1, modulo: None, coeff: row_len },
        ],
    };
    let all: Vec<&Stmt> = phases
        .iter()
        .flat_map(|p| match p {
            Phase::Row(stmts) | Phase::Loop { stmts, .. } => stmts.iter(),
        })
        .collect();
    let loaded = |a: usize| all.iter().any(|s| matches!(s, Stmt::Load { arg, .. } if *arg == a));
    let row_stores = |a: usize| {
        phases.iter().all(|p| match p {
            Phase::Row(stmts) => !stmts.iter().any(|s| matches!(s, Stmt::Store { arg, .. } if *arg == a)),
            Phase::Loop { stmts, .. } => {
                stmts.iter().all(|s| !matches!(s, Stmt::Store { arg, index, .. } if *arg == a && *index != whole_row))
            }
        })
    };
    let mut rounded: Vec<usize> = (0..k.args.len())
        .filter(|&a| k.args[a].output && k.args[a].dtype == DType::BF16 && !loaded(a) && row_stores(a))
        .filter(|&a| all.iter().any(|s| matches!(s, Stmt::Store { arg, .. } if *arg == a)))
        .collect();
    rounded.truncate((MAX_ROW_BUFFER_BYTES / (row_len.max(1) * size_of::<f32>())).saturating_sub(kept));
    rounded
}

/// A loop's statements as printed: the kernel IR's, less those only needed for values read back
/// from a row buffer.
struct LoopBody<'a> {
    /// The statements printed, in order.
    stmts: Vec<&'a Stmt>,
    /// Temporaries read from their row buffer instead of computed.
    read: Vec<usize>,
    /// Temporaries stored into their row buffer once computed.
    write: Vec<usize>,
    /// Arguments whose stores go to their row buffer of floats (see [`rounded_rows`]).
    rounded: Vec<usize>,
}

impl<'a> LoopBody<'a> {
    /// Every statement, no row buffer.
    fn all(stmts: &'a [Stmt]) -> LoopBody<'a> {
        LoopBody { stmts: stmts.iter().collect(), read: Vec::new(), write: Vec::new(), rounded: Vec::new() }
    }

    /// The body of a loop of `stmts` feeding `reductions`, where the `kept` values already
    /// `stored` by an earlier loop are read back and the others stored, and stores into the
    /// `rounded` arguments go to their row buffers.
    fn new(
        stmts: &'a [Stmt],
        reductions: &[Reduce],
        kept: &[usize],
        stored: &[usize],
        rounded: &[usize],
    ) -> LoopBody<'a> {
        let here: Vec<usize> = defined(stmts).into_iter().filter(|t| kept.contains(t)).collect();
        let (read, write): (Vec<usize>, Vec<usize>) = here.into_iter().partition(|t| stored.contains(t));
        // Walking back from what the loop must produce (stores, accumulated values), keep the
        // statements those need; a value read back needs nothing.
        let mut needed: Vec<usize> = reductions.iter().filter_map(|r| tmp_of(&r.value)).collect();
        let mut printed: Vec<&Stmt> = Vec::new();
        for s in stmts.iter().rev() {
            let (defines, operands): (Option<usize>, Vec<&Value>) = match s {
                Stmt::Load { tmp, .. } => (Some(*tmp), Vec::new()),
                Stmt::Compute { tmp, .. } if read.contains(tmp) => (Some(*tmp), Vec::new()),
                Stmt::Compute { tmp, operands, .. } => (Some(*tmp), operands.iter().collect()),
                Stmt::Store { value, .. } => (None, vec![value]),
            };
            if defines.is_none_or(|t| needed.contains(&t) || write.contains(&t)) {
                needed.extend(operands.into_iter().filter_map(tmp_of));
                printed.push(s);
            }
        }
        printed.reverse();
        LoopBody { stmts: printed, read, write, rounded: rounded.to_vec() }
    }
}

/// The temporary a value names, if it is one.
fn tmp_of(value: &Value) -> Option<usize> {
    match value {
        Value::Tmp(t) => Some(*t),
        Value::Constant(_) => None,
    }
}

/// One loop over a row of `row_len` elements: its statements, then each reduction's
/// accumulation. Split into [`GROUPS`] parts of the row, each with its own accumulators
/// (combined after the loop), when the row has at least [`MIN_GROUPED_ROW`] elements and the
/// loop reduces or is a long chain of vector-math calls.
fn row_loop(k: &Kernel, row_len: usize, body: &LoopBody, reductions: &[Reduce], indent: &str) -> String {
    let long = !reductions.is_empty() || vector_math_chain(body) >= LONG_CHAIN;
    let grouped = row_len >= MIN_GROUPED_ROW && long;
    if !grouped {
        let mut out = String::new();
        for r in reductions {
            writeln!(out, "{indent}float tmp{} = {};", r.tmp, identity(r.combine, Dialect::C)).unwrap();
        }
        // A short row's sum is reassociated into vector lanes; its max stays a scalar loop (the
        // GCC bug in `plain_loop`).
        if !reductions.is_empty() && reductions.iter().all(|r| r.combine == Combine::Sum) {
            writeln!(out, "{indent}#pragma omp simd reduction(+:{})", accumulators(reductions, None)).unwrap();
        }
        out.push_str(&plain_loop(k, 0, row_len, body, reductions, indent));
        return out;
    }
    let part = row_len / GROUPS;
    let mut out = String::new();
    for r in reductions {
        let init: Vec<String> =
            (0..GROUPS).map(|g| format!("tmp{}_{g} = {}", r.tmp, identity(r.combine, Dialect::C))).collect();
        writeln!(out, "{indent}float {};", init.join(", ")).unwrap();
    }
    // Partial results per lane and group, combined after the loop: reassociation, which a
    // reduction clause allows. `maximum` is declared as a reduction in the prelude.
    let mut pragma = format!("{indent}#pragma omp simd");
    for (combine, clause) in [(Combine::Sum, "+"), (Combine::Max, "maximum")] {
        let these: Vec<Reduce> = reductions.iter().filter(|r| r.combine == combine).copied().collect();
        if !these.is_empty() {
            let names: Vec<String> = (0..GROUPS).map(|g| accumulators(&these, Some(g))).collect();
            write!(pragma, " reduction({clause}:{})", names.join(", ")).unwrap();
        }
    }
    writeln!(out, "{pragma}").unwrap();
    writeln!(out, "{indent}for (int64_t r = 0; r < {part}; r++) {{").unwrap();
    let inner = format!("{indent}    ");
    writeln!(out, "{inner}{};", group_positions(Counter::R, |g| (g * part).to_string())).unwrap();
    out.push_str(&grouped_statements(k, body, Counter::R, &inner));
    let local = body.defined();
    for r in reductions {
        for g in 0..GROUPS {
            let acc = format!("tmp{}_{g}", r.tmp);
            let value = group_spelling(g, Counter::R, &local, |spell| spell.value(&r.value));
            writeln!(out, "{inner}{acc} = {};", combine_expr(r.combine, &acc, &value)).unwrap();
        }
    }
    writeln!(out, "{indent}}}").unwrap();
    for r in reductions {
        let parts: Vec<String> = (0..GROUPS).map(|g| format!("tmp{}_{g}", r.tmp)).collect();
        writeln!(out, "{indent}float tmp{} = {};", r.tmp, combine_tree(r.combine, &parts)).unwrap();
    }
    if !row_len.is_multiple_of(GROUPS) {
        out.push_str(&plain_loop(k, GROUPS * part, row_len, body, reductions, indent));
    }
    out
}

/// `for (r = start; r < end; r++)` around the statements and each reduction's accumulation into
/// its (already declared) `tmpN`.
fn plain_loop(k: &Kernel, start: usize, end: usize, body: &LoopBody, reductions: &[Reduce], indent: &str) -> String {
    let mut out = String::new();
    // GCC 12 at -O3 fully unrolls a short row loop holding a max reduction, then vectorises the
    // row loop around it with masked loads and gets the result wrong (found by this crate's
    // property test). Keeping the loop a loop avoids that.
    if reductions.iter().any(|r| r.combine == Combine::Max) {
        writeln!(out, "{indent}#pragma GCC unroll 1").unwrap();
    }
    writeln!(out, "{indent}for (int64_t r = {start}; r < {end}; r++) {{").unwrap();
    let inner = format!("{indent}    ");
    out.push_str(&statements(k, body, Counter::R, &inner));
    let spell = scalar_spelling(Dialect::C);
    for r in reductions {
        let acc = format!("tmp{}", r.tmp);
        writeln!(out, "{inner}{acc} = {};", combine_expr(r.combine, &acc, &spell.value(&r.value))).unwrap();
    }
    writeln!(out, "{indent}}}").unwrap();
    out
}

/// The statements as lines of C at `indent`, with the plain spelling: temporaries `tmpN`,
/// indices at `counter`.
fn statements(k: &Kernel, body: &LoopBody, counter: Counter, indent: &str) -> String {
    let index = |i: &FlatIndex| counter.index(i, counter.name());
    let spell = Spelling { dialect: Dialect::C, tmp: &|t| format!("tmp{t}"), index: &index };
    body.stmts.iter().map(|s| format!("{indent}{}\n", body.line(k, &spell, s))).collect()
}

/// The statements for every group, interleaved: each statement once per group before the next.
fn grouped_statements(k: &Kernel, body: &LoopBody, counter: Counter, indent: &str) -> String {
    let local = body.defined();
    let mut out = String::new();
    for s in &body.stmts {
        for g in 0..GROUPS {
            let line = group_spelling(g, counter, &local, |spell| body.line(k, spell, s));
            writeln!(out, "{indent}{line}").unwrap();
        }
    }
    out
}

impl LoopBody<'_> {
    /// `s` as C: a value read back is loaded from its row buffer; a value stored is also
    /// written to it, on the same line.
    fn line(&self, k: &Kernel, spell: &Spelling, s: &Stmt) -> String {
        // The row buffer's element at `r` (or the group's `r_g`).
        let r = FlatIndex { offset: 0, terms: vec![Term { var: Var::R, div: 1, modulo: None, coeff: 1 }] };
        match s {
            Stmt::Compute { tmp, .. } if self.read.contains(tmp) => {
                format!("float {} = tmp{tmp}_row[{}];", (spell.tmp)(*tmp), (spell.index)(&r))
            }
            Stmt::Compute { tmp, .. } if self.write.contains(tmp) => {
                format!("{} tmp{tmp}_row[{}] = {};", spell.stmt(k, s, true), (spell.index)(&r), (spell.tmp)(*tmp))
            }
            Stmt::Store { arg, value, .. } if self.rounded.contains(arg) => {
                format!("{}_row[{}] = {};", k.args[*arg].name, (spell.index)(&r), spell.value(value))
            }
            _ => spell.stmt(k, s, true),
        }
    }

    /// The arguments of [`LoopBody::rounded`] this loop stores, whose row buffers it fills.
    fn rounded_stores(&self) -> Vec<usize> {
        let mut args: Vec<usize> = Vec::new();
        for s in &self.stmts {
            if let Stmt::Store { arg, .. } = s
                && self.rounded.contains(arg)
                && !args.contains(arg)
            {
                args.push(*arg);
            }
        }
        args
    }

    /// The temporaries the body defines, which each group computes for itself.
    fn defined(&self) -> Vec<usize> {
        self.stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } => Some(*tmp),
                Stmt::Store { .. } => None,
            })
            .collect()
    }
}

/// The variable a printed loop counts with, which says how an index reads at its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counter {
    /// `x`: the element of a pointwise loop, or the row of a reduction outside its row loops.
    X,
    /// `r`: the position along a reduction's row `x`.
    R,
    /// `col`: the column of `x = row * tile + col` in a pointwise loop tiled by rows.
    Col {
        /// The length of a row.
        tile: usize,
    },
}

impl Counter {
    /// The variable's name in the loop header.
    fn name(self) -> &'static str {
        match self {
            Counter::X => Var::X.name(),
            Counter::R => Var::R.name(),
            Counter::Col { .. } => "col",
        }
    }

    /// `index` as C with this variable at `position` (its name, or a group's `x_1`).
    fn index(self, index: &FlatIndex, position: &str) -> String {
        match self {
            Counter::X => index.render(position, Var::R.name()),
            Counter::R => index.render(Var::X.name(), position),
            Counter::Col { tile } => index.render_tiled(tile, "row", position),
        }
    }
}

/// `print` with the spelling of group `g`: it names the temporaries defined in the loop
/// (`local`) `tmpN_g` (values computed outside it, per row, are shared) and indexes at its own
/// position of `counter` (`x_g`, `r_g` or `col_g`; group 0 uses the loop variable itself).
fn group_spelling<T>(g: usize, counter: Counter, local: &[usize], print: impl FnOnce(&Spelling) -> T) -> T {
    let tmp = |t: usize| if local.contains(&t) { format!("tmp{t}_{g}") } else { format!("tmp{t}") };
    let position = group_position(counter, g);
    let index = |i: &FlatIndex| counter.index(i, &position);
    print(&Spelling { dialect: Dialect::C, tmp: &tmp, index: &index })
}

/// The name of group `g`'s position along `counter`.
fn group_position(counter: Counter, g: usize) -> String {
    if g == 0 { counter.name().to_string() } else { format!("{}_{g}", counter.name()) }
}

/// The declaration of every group's position but the first, at `offset(g)` from group 0's:
/// `int64_t x_1 = x + part, x_2 = x + 2 * part, ...`.
fn group_positions(counter: Counter, offset: impl Fn(usize) -> String) -> String {
    let each: Vec<String> =
        (1..GROUPS).map(|g| format!("{} = {} + {}", group_position(counter, g), counter.name(), offset(g))).collect();
    format!("int64_t {}", each.join(", "))
}

/// The temporaries `stmts` define.
fn defined(stmts: &[Stmt]) -> Vec<usize> {
    stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Load { tmp, .. } | Stmt::Compute { tmp, .. } => Some(*tmp),
            Stmt::Store { .. } => None,
        })
        .collect()
}

/// The accumulators of `reductions`, comma-separated: `tmpN`, or group `g`'s `tmpN_g`.
fn accumulators(reductions: &[Reduce], group: Option<usize>) -> String {
    let names: Vec<String> = reductions
        .iter()
        .map(|r| match group {
            Some(g) => format!("tmp{}_{g}", r.tmp),
            None => format!("tmp{}", r.tmp),
        })
        .collect();
    names.join(", ")
}

/// `parts` combined pairwise: `(a + b) + (c + d)`, or `maximum(maximum(a, b), maximum(c, d))`.
fn combine_tree(combine: Combine, parts: &[String]) -> String {
    if let [only] = parts {
        return only.clone();
    }
    let (left, right) = parts.split_at(parts.len() / 2);
    let operand = |half: &[String]| {
        let text = combine_tree(combine, half);
        if half.len() > 1 && combine == Combine::Sum { format!("({text})") } else { text }
    };
    combine_expr(combine, &operand(left), &operand(right))
}

/// The most vector-math calls (each tens of dependent instructions) on one chain of dependent
/// statements; values from outside the body, and values read back from a row buffer, start
/// chains of none.
fn vector_math_chain(body: &LoopBody) -> usize {
    let mut calls: HashMap<usize, usize> = HashMap::new();
    for s in &body.stmts {
        if let Stmt::Compute { tmp, op, operands } = s
            && !body.read.contains(tmp)
        {
            let before = operands
                .iter()
                .filter_map(|v| match v {
                    Value::Tmp(t) => calls.get(t).copied(),
                    Value::Constant(_) => None,
                })
                .max()
                .unwrap_or(0);
            calls.insert(*tmp, before + usize::from(is_vector_math(op)));
        }
    }
    calls.into_values().max().unwrap_or(0)
}

/// Whether `op` is a call of the vector math.
fn is_vector_math(op: &PointwiseOp) -> bool {
    matches!(op, PointwiseOp::Unary(u) if vecmath::c_function(*u).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_combine_pairwise() {
        let parts: Vec<String> = (0..4).map(|g| format!("tmp4_{g}")).collect();
        assert_eq!(combine_tree(Combine::Sum, &parts), "(tmp4_0 + tmp4_1) + (tmp4_2 + tmp4_3)");
        assert_eq!(combine_tree(Combine::Max, &parts), "maximum(maximum(tmp4_0, tmp4_1), maximum(tmp4_2, tmp4_3))");
    }

    #[test]
    fn a_chain_counts_the_vector_math_calls_one_after_another() {
        use crate::op::{BinaryOp, UnaryOp};
        let unary = |tmp, op, of| Stmt::Compute { tmp, op: PointwiseOp::Unary(op), operands: vec![Value::Tmp(of)] };
        let stmts = [
            Stmt::Load { tmp: 0, arg: 0, index: FlatIndex { offset: 0, terms: vec![] } },
            unary(1, UnaryOp::Sin, 0),
            Stmt::Compute {
                tmp: 2,
                op: PointwiseOp::Binary(BinaryOp::Mul),
                operands: vec![Value::Tmp(1), Value::Constant(2.0)],
            },
            unary(3, UnaryOp::Tanh, 2),
            // Beside the chain, not on it; `abs` is no vector-math call.
            unary(4, UnaryOp::Exp, 0),
            unary(5, UnaryOp::Abs, 4),
        ];
        assert_eq!(vector_math_chain(&LoopBody::all(&stmts)), 2);
        assert_eq!(vector_math_chain(&LoopBody::all(&stmts[..3])), 1);
        assert_eq!(vector_math_chain(&LoopBody::all(&stmts[..1])), 0);
    }

    #[test]
    fn group_positions_are_a_part_apart() {
        assert_eq!(
            group_positions(Counter::R, |g| (g * 1024).to_string()),
            "int64_t r_1 = r + 1024, r_2 = r + 2048, r_3 = r + 3072"
        );
    }
}
