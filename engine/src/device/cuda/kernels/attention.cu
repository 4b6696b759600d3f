// Scaled dot-product attention, flash-attention style (Dao et al., 2022): the analogue of the
// forward kernels behind PyTorch's `scaled_dot_product_attention`. The f32 kernels come first;
// the bf16 and f16 ones, on the tensor cores, at the end.
//
// One block owns BR = 16 * RT queries of one batch entry and visits the keys BC at a time. For each tile
// it computes the BR x BC scores in registers, folds them into a running maximum `m`, a running
// sum of exponentials `l` and a running output `o` (the online softmax: when the maximum rises,
// what was gathered so far is rescaled by exp(m_old - m_new)), and moves on. Scores and
// probabilities never reach global memory; memory traffic is reading q, k, v once per block and
// writing the output once, so memory grows linearly with the sequence length.
//
// Threads: 128 per block, as a 16 x 8 grid. Thread (ty, tx) owns RT query rows ty*RT ..; of a
// score tile it computes 8 of those rows' columns, and of the output HD/8 columns, in runs of 4
// (see `column`). The 8 threads of a row group share their rows, so row maxima
// and sums are combined with three warp shuffles. Each thread's RT x 8 tile of scores costs
// RT/4 + 2 float4 reads of shared memory per step of the dot products for 8 * RT multiply-adds:
// RT = 8 (BR = 128) keeps the arithmetic units, not shared memory, the limit; HD = 128 takes
// RT = 4 so that its output rows still fit in registers.
//
// Shared memory (dynamic, per block): q^T [HD][BR], k^T [HD][BC], v [BC][HD], p^T [BC][BR]. The
// transposes make every inner-loop read a float4 of neighbouring rows or columns. Tiles arrive by
// asynchronous copies (cp.async, sm_80 on): k's next tile while p meets v, v's next tile while the
// next scores are computed, so global-memory latency hides behind arithmetic with one buffer each. HD is the head
// dim rounded up to 32, 64 or 128 (zero padded), a template parameter so that loops unroll and
// the output stays in registers; the element type is the `real` typedef, kept as one name so
// that half-precision tiles can follow.
//
// The host side is engine/src/device/cuda/attention.rs; AttnParams mirrors its #[repr(C)] twin
// field for field.

typedef long long i64;
typedef float real;

#define NEG_INF __int_as_float(0xff800000)
#define LOG2E 1.4426950408889634f
#define BC 64
#define THREADS 128

// A batch of matrices: element (n, row, col) is at
// ptr + (n / inner) * outer_stride + (n % inner) * inner_stride + row * row_stride + col * col_stride,
// in elements of the operand's dtype.
struct AttnOperand {
    const void* ptr;
    i64 outer_stride;
    i64 inner_stride;
    i64 row_stride;
    i64 col_stride;
};

struct AttnParams {
    AttnOperand q, k, v, mask;
    AttnOperand out;  // [batch, q_len, value_dim] of q's dtype, columns adjacent (col_stride 1)
    i64 inner;   // the size that n % inner refers to (the heads)
    int q_len, kv_len, head_dim, value_dim;
    float scale_log2;  // scale * log2(e): exponentials are taken as exp2
    int mask_kind;     // 0 none, 1 boolean (nonzero keeps), 2 additive
    int causal;        // query i sees keys j <= i
    int mask_dtype;    // the mask's dtype (DTYPE_* in dtypes.cuh); q, k and v have one, the kernel's
};

// Where batch entry `n` of an operand starts, in elements.
__device__ __forceinline__ i64 batch_offset(const AttnOperand& a, i64 n, i64 inner) {
    return (n / inner) * a.outer_stride + (n % inner) * a.inner_stride;
}

// Where row `row` of batch entry `n` of the output starts, in elements: rows of one entry need
// not be adjacent (an output in q's layout, [batch, q_len, heads, value_dim] in memory).
__device__ __forceinline__ i64 out_row(const AttnParams& p, i64 n, int row) {
    return batch_offset(p.out, n, p.inner) + row * p.out.row_stride;
}

template <typename T>
__device__ __forceinline__ const T* batch_ptr(const AttnOperand& a, i64 n, i64 inner) {
    return reinterpret_cast<const T*>(a.ptr) + batch_offset(a, n, inner);
}

// Where batch entry `n` of q, k, v (of element type T) and the mask (null without one) start.
template <typename T>
struct Entry {
    const T *q, *k, *v;
    const void* mask;
};

template <typename T>
__device__ __forceinline__ Entry<T> entry(const AttnParams& p, i64 n) {
    return {batch_ptr<T>(p.q, n, p.inner), batch_ptr<T>(p.k, n, p.inner), batch_ptr<T>(p.v, n, p.inner),
            p.mask_kind ? element_ptr(p.mask.ptr, p.mask_dtype, batch_offset(p.mask, n, p.inner)) : nullptr};
}

// 2^x as the softmax takes it: one `ex2.approx.ftz` on the multi-function unit. Plain `exp2f`
// (NVRTC builds without -ftz) is `ex2.approx` plus the instructions that keep subnormal results;
// a probability under 2^-126 adds nothing a row's sum can hold, and every score takes one
// exponential, so those instructions cost the Hopper kernel about a quarter of its time
// (bench/NOTES-precision.md).
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float row_max(float x) {
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float row_sum(float x) {
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// RT neighbouring floats of shared memory (a row group's queries or probabilities) into registers,
// a float4 at a time.
template <int RT>
__device__ __forceinline__ void load_rows(const real* src, float (&dst)[RT]) {
#pragma unroll
    for (int i = 0; i < RT; i += 4) {
        const float4 v = *(const float4*)&src[i];
        dst[i] = v.x, dst[i + 1] = v.y, dst[i + 2] = v.z, dst[i + 3] = v.w;
    }
}

// Copies one tile element from global to shared memory, or stores 0 where `valid` is false. On
// sm_80 and later it is an asynchronous copy (cp.async, 4 bytes, zero filled), so a thread goes on
// computing while the tile arrives and waits for it with `tile_wait`; older GPUs copy through a
// register. The copy is 4 bytes wide because the tiles are stored transposed and read through
// arbitrary strides.
__device__ __forceinline__ void tile_copy(real* dst, const real* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(src), "r"(valid ? 4 : 0));
#else
    *dst = valid ? *src : 0.0f;
#endif
}

// Ends a thread's batch of `tile_copy`s and waits for every one it started: the copies are then in
// shared memory, visible to the other threads after the next __syncthreads().
__device__ __forceinline__ void tile_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
#endif
}

// Starts copying a ROWS x COLS tile (rows from `row0`, zero padded past `rows` rows and `cols`
// columns) into shared memory at `dst + row * row_step + col * col_step`. FAST is the dimension
// neighbouring threads take (0: rows, 1: columns), so that neighbouring threads store to
// neighbouring shared-memory words; its size divides THREADS, so a thread keeps one index of
// it and steps the other.
template <int ROWS, int COLS, int FAST>
__device__ __forceinline__ void tile_start(real* dst, int row_step, int col_step, const real* src, i64 row_stride,
                                           i64 col_stride, int row0, int rows, int cols) {
    constexpr int FAST_SIZE = FAST == 0 ? ROWS : COLS;
    constexpr int STEP = THREADS / FAST_SIZE;
    const int fixed = threadIdx.x % FAST_SIZE;
#pragma unroll 4
    for (int slow = threadIdx.x / FAST_SIZE; slow < (FAST == 0 ? COLS : ROWS); slow += STEP) {
        const int r = FAST == 0 ? fixed : slow, c = FAST == 0 ? slow : fixed;
        const bool valid = row0 + r < rows && c < cols;
        const real* from = valid ? src + (row0 + r) * row_stride + c * col_stride : src;
        tile_copy(&dst[r * row_step + c * col_step], from, valid);
    }
}

// The score `x` (scaled, in base 2) of query `row` and key `key`, or -inf where the key is past the
// end, after the query under `causal`, or left out by the mask (of any dtype); an additive mask
// is added.
__device__ __forceinline__ float masked(const AttnParams& p, const void* mask, float x, int row, int key) {
    if (key >= p.kv_len || (p.causal && key > row)) return NEG_INF;
    if (p.mask_kind && row < p.q_len) {
        const float mv = load_as_float(mask, p.mask_dtype, row * p.mask.row_stride + key * p.mask.col_stride);
        return p.mask_kind == 1 ? (mv != 0.0f ? x : NEG_INF) : fmaf(mv, LOG2E, x);
    }
    return x;
}

// An output element: the running sum `o` over the sum of exponentials `l` (`inv` = 1 / l). A row
// whose keys are all masked has l == 0 and o == 0: 0/0 is NaN, as PyTorch's math path gives.
__device__ __forceinline__ float normalized(float o, float l, float inv) { return l == 0.0f ? o / l : o * inv; }

// The tile column (a key of a score tile, a value column of the output) that is a thread's `c`-th:
// a thread owns runs of 4 neighbouring columns, 32 apart (tx*4 .. tx*4+3, then 32 + tx*4 ..), so
// the 8 threads of a row group read 8 different float4s of one 128-byte row at once, all 32
// shared-memory banks, where runs of 8 (tx*8 ..) would make threads tx and tx+4 collide.
__device__ __forceinline__ int column(int tx, int c) { return (c / 4) * 32 + tx * 4 + c % 4; }

template <int HD, int RT>
__device__ void flash_attention(const AttnParams& p) {
    constexpr int BR = 16 * RT;  // queries per block
    constexpr int OC = HD / 8;   // output columns per thread
    extern __shared__ float4 shared4[];
    real* qs = (real*)shared4;  // [HD][BR]
    real* ks = qs + HD * BR;    // [HD][BC]
    real* vs = ks + HD * BC;    // [BC][HD]
    real* ps = vs + BC * HD;    // [BC][BR]

    const int tid = threadIdx.x, ty = tid / 8, tx = tid % 8;
    const i64 n = blockIdx.y;
    const int q0 = blockIdx.x * BR;
    const Entry<real> at = entry<real>(p, n);

    // q^T and the first k^T tile, zero padded past the last query or key and the head dim; the
    // first v tile arrives while the first scores are computed.
    const int kv_end = p.causal ? min(p.kv_len, q0 + BR) : p.kv_len;  // a causal block needs no later key
    tile_start<BR, HD, 0>(qs, 1, BR, at.q, p.q.row_stride, p.q.col_stride, q0, p.q_len, p.head_dim);
    tile_start<BC, HD, 0>(ks, 1, BC, at.k, p.k.row_stride, p.k.col_stride, 0, kv_end, p.head_dim);
    tile_wait();
    tile_start<BC, HD, 1>(vs, HD, 1, at.v, p.v.row_stride, p.v.col_stride, 0, kv_end, p.value_dim);
    __syncthreads();

    float o[RT][OC];
    float m[RT], l[RT];
#pragma unroll
    for (int i = 0; i < RT; ++i) {
        m[i] = NEG_INF;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < OC; ++c) o[i][c] = 0.0f;
    }

    // k and v take turns: the next k tile is copied while this tile's probabilities meet v, and
    // the next v tile while the next scores are computed, so copies overlap arithmetic without a
    // second buffer.
    for (int k0 = 0; k0 < kv_end; k0 += BC) {
        float s[RT][8];
#pragma unroll
        for (int i = 0; i < RT; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) s[i][j] = 0.0f;
#pragma unroll 8
        for (int d = 0; d < HD; ++d) {
            float av[RT];
            load_rows<RT>(&qs[d * BR + ty * RT], av);
            const float4 b0 = *(const float4*)&ks[d * BC + column(tx, 0)];
            const float4 b1 = *(const float4*)&ks[d * BC + column(tx, 4)];
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < RT; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) s[i][j] = fmaf(av[i], bv[j], s[i][j]);
        }

        // Most tiles of an unmasked attention have no key to leave out: they skip the checks.
        const bool whole = !p.mask_kind && !p.causal && k0 + BC <= p.kv_len;
#pragma unroll
        for (int i = 0; i < RT; ++i) {
            const int row = q0 + ty * RT + i;
            float tile_max = NEG_INF;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int key = k0 + column(tx, j);
                float x = s[i][j] * p.scale_log2;
                if (!whole) x = masked(p, at.mask, x, row, key);
                s[i][j] = x;
                tile_max = fmaxf(tile_max, x);
            }
            const float m_new = fmaxf(m[i], row_max(tile_max));
            // While every key so far is masked, m_new is -inf: add nothing (and make no NaN).
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0f : exp2_ftz(m[i] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                s[i][j] = none ? 0.0f : exp2_ftz(s[i][j] - m_new);
                sum += s[i][j];
            }
            l[i] = l[i] * alpha + row_sum(sum);
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < OC; ++c) o[i][c] *= alpha;
        }
        tile_wait();  // this tile's v
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int i = 0; i < RT; i += 4)
                *(float4*)&ps[column(tx, j) * BR + ty * RT + i] = make_float4(s[i][j], s[i + 1][j], s[i + 2][j], s[i + 3][j]);
        __syncthreads();  // p and v are in place; k is read no more
        const int next = k0 + BC;
        if (next < kv_end) tile_start<BC, HD, 0>(ks, 1, BC, at.k, p.k.row_stride, p.k.col_stride, next, kv_end, p.head_dim);

#pragma unroll 4
        for (int j = 0; j < BC; ++j) {
            float pv[RT];
            load_rows<RT>(&ps[j * BR + ty * RT], pv);
#pragma unroll
            for (int c = 0; c < OC; c += 4) {
                const float4 v4 = *(const float4*)&vs[j * HD + column(tx, c)];
#pragma unroll
                for (int i = 0; i < RT; ++i) {
                    o[i][c] = fmaf(pv[i], v4.x, o[i][c]);
                    o[i][c + 1] = fmaf(pv[i], v4.y, o[i][c + 1]);
                    o[i][c + 2] = fmaf(pv[i], v4.z, o[i][c + 2]);
                    o[i][c + 3] = fmaf(pv[i], v4.w, o[i][c + 3]);
                }
            }
        }
        tile_wait();      // the next k
        __syncthreads();  // k is in place; p and v are read no more
        if (next < kv_end) tile_start<BC, HD, 1>(vs, HD, 1, at.v, p.v.row_stride, p.v.col_stride, next, kv_end, p.value_dim);
    }

#pragma unroll
    for (int i = 0; i < RT; ++i) {
        const int row = q0 + ty * RT + i;
        if (row >= p.q_len) continue;
        const float inv = 1.0f / l[i];
        real* out = reinterpret_cast<real*>(const_cast<void*>(p.out.ptr)) + out_row(p, n, row);
#pragma unroll
        for (int c = 0; c < OC; ++c) {
            const int col = column(tx, c);
            if (col < p.value_dim) out[col] = normalized(o[i][c], l[i], inv);
        }
    }
}

#if __CUDA_ARCH__ >= 800
// The same attention on the tensor cores (sm_80 on), at float32 accuracy: both products, q k^T and
// p v, are taken as three TF32 products of split operands (`split`, `mma3` in tf32x3.cuh, which
// the source module puts in front of this file).
//
// One block owns 64 queries, a warp 16 of them: the rows of one `mma.m16n8k8` tile. A warp's
// scores for a key tile (16 x 64) stay in the mma's accumulator registers, and so do its
// probabilities: the accumulator of score column pair (2q, 2q+1) is exactly what the next product
// needs as its left operand if the 8 keys of a step are taken in the order 0, 2, 4, 6 | 1, 3, 5, 7
// (an mma adds its 8 products in any order, so v's rows are read in that order too). So p never
// goes through shared memory, and a row's maximum and sum take two shuffles within its quad of
// threads. Each tile's p v is summed apart and added to the running output with an ordinary
// rounding add, which keeps the tensor core's rounding toward zero from accumulating over the
// whole sequence.
//
// Shared memory: q [64][HD + 16], k [64][HD + 16] (a thread reads four neighbouring head-dim
// elements as one float4; rows 16 floats past a multiple of 32 apart put a quarter-warp's reads in
// distinct banks), v [64][HD + 4] (read one float at a time, rows 2q and 2q + 1, column g: a
// stride of 4 past a multiple of 32 keeps those distinct too). The copies and their overlap with
// arithmetic are the SIMT kernel's.

template <int HD>
__device__ void flash_attention_tc(const AttnParams& p) {
    constexpr int BR = 64;        // queries per block, 16 per warp
    constexpr int LDK = HD + 16;  // floats between rows of q and k in shared memory
    constexpr int LDV = HD + 4;   // ... and of v
    constexpr int NT = BC / 8;    // 8-key steps of a key tile
    constexpr int OT = HD / 8;    // 8-column tiles of the output
    extern __shared__ float4 shared4[];
    real* qs = (real*)shared4;  // [BR][LDK]
    real* ks = qs + BR * LDK;   // [BC][LDK]
    real* vs = ks + BC * LDK;   // [BC][LDV]

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q4 = lane & 3;  // the fragments' row group and column pair
    const i64 n = blockIdx.y;
    const int q0 = blockIdx.x * BR;
    const Entry<real> at = entry<real>(p, n);

    const int kv_end = p.causal ? min(p.kv_len, q0 + BR) : p.kv_len;
    tile_start<BR, HD, 1>(qs, LDK, 1, at.q, p.q.row_stride, p.q.col_stride, q0, p.q_len, p.head_dim);
    tile_start<BC, HD, 1>(ks, LDK, 1, at.k, p.k.row_stride, p.k.col_stride, 0, kv_end, p.head_dim);
    tile_wait();
    tile_start<BC, HD, 1>(vs, LDV, 1, at.v, p.v.row_stride, p.v.col_stride, 0, kv_end, p.value_dim);
    __syncthreads();

    // This thread's two rows: g and g + 8 of its warp's 16 (index h = 0, 1).
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    float o[OT][4];
#pragma unroll
    for (int t = 0; t < OT; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
    const real* q_rows = qs + (warp * 16 + g) * LDK + 4 * q4;

    for (int k0 = 0; k0 < kv_end; k0 += BC) {
        // Scores: s[t][e] is row g + 8 (e / 2), key k0 + 8 t + 2 q4 + e % 2.
        float s[NT][4];
#pragma unroll
        for (int t = 0; t < NT; t++) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
        for (int d = 0; d < HD; d += 16) {
            // Sixteen head-dim elements as a float4 a row and thread, two mma steps' worth: thread
            // q4 takes elements 4 q4 .. 4 q4 + 3 (any order will do if q and k agree).
            const float4 qa = *(const float4*)(q_rows + d);
            const float4 qb = *(const float4*)(q_rows + 8 * LDK + d);
            float4 kf[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) kf[t] = *(const float4*)(ks + (t * 8 + g) * LDK + d + 4 * q4);
#pragma unroll
            for (int step = 0; step < 2; step++) {
                u32 a_big[4], a_small[4], b_big[NT][2], b_small[NT][2];
                split(step ? qa.z : qa.x, a_big[0], a_small[0]);
                split(step ? qb.z : qb.x, a_big[1], a_small[1]);
                split(step ? qa.w : qa.y, a_big[2], a_small[2]);
                split(step ? qb.w : qb.y, a_big[3], a_small[3]);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    split(step ? kf[t].z : kf[t].x, b_big[t][0], b_small[t][0]);
                    split(step ? kf[t].w : kf[t].y, b_big[t][1], b_small[t][1]);
                }
                mma3<1, NT>(&s, &a_big, &a_small, b_big, b_small);
            }
        }

        // The online softmax over this tile, in base 2, as in the SIMT kernel.
        const bool whole = !p.mask_kind && !p.causal && k0 + BC <= p.kv_len;
        float tile_max[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int t = 0; t < NT; t++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = q0 + warp * 16 + g + 8 * (e / 2), key = k0 + t * 8 + 2 * q4 + e % 2;
                float x = s[t][e] * p.scale_log2;
                if (!whole) x = masked(p, at.mask, x, row, key);
                s[t][e] = x;
                tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
            }
        }
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mx = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[h], mx);
            // While every key so far is masked, m_new is -inf: add nothing (and make no NaN).
            const bool none = m_new == NEG_INF;
            alpha[h] = none ? 1.0f : exp2_ftz(m[h] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++) {
                    s[t][e] = none ? 0.0f : exp2_ftz(s[t][e] - m_new);
                    sum += s[t][e];
                }
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            l[h] = l[h] * alpha[h] + sum;
            m[h] = m_new;
        }

        tile_wait();      // this tile's v
        __syncthreads();  // v is in place; k is read no more
        const int next = k0 + BC;
        if (next < kv_end) tile_start<BC, HD, 1>(ks, LDK, 1, at.k, p.k.row_stride, p.k.col_stride, next, kv_end, p.head_dim);

        float part[OT][4];
#pragma unroll
        for (int t = 0; t < OT; t++) part[t][0] = part[t][1] = part[t][2] = part[t][3] = 0.0f;
#pragma unroll 2
        for (int t = 0; t < NT; t++) {
            // p's accumulator layout as the left operand: keys 2 q4 and 2 q4 + 1 play columns q4
            // and q4 + 4.
            u32 a_big[4], a_small[4], b_big[OT][2], b_small[OT][2];
            split(s[t][0], a_big[0], a_small[0]);
            split(s[t][2], a_big[1], a_small[1]);
            split(s[t][1], a_big[2], a_small[2]);
            split(s[t][3], a_big[3], a_small[3]);
            const real* v_rows = vs + (t * 8 + 2 * q4) * LDV + g;
#pragma unroll
            for (int c = 0; c < OT; c++) {
                split(v_rows[c * 8], b_big[c][0], b_small[c][0]);
                split(v_rows[LDV + c * 8], b_big[c][1], b_small[c][1]);
            }
            mma3<1, OT>(&part, &a_big, &a_small, b_big, b_small);
        }
#pragma unroll
        for (int c = 0; c < OT; c++) {
            o[c][0] = fmaf(o[c][0], alpha[0], part[c][0]);
            o[c][1] = fmaf(o[c][1], alpha[0], part[c][1]);
            o[c][2] = fmaf(o[c][2], alpha[1], part[c][2]);
            o[c][3] = fmaf(o[c][3], alpha[1], part[c][3]);
        }
        tile_wait();      // the next k
        __syncthreads();  // k is in place; v is read no more
        if (next < kv_end) tile_start<BC, HD, 1>(vs, LDV, 1, at.v, p.v.row_stride, p.v.col_stride, next, kv_end, p.value_dim);
    }

#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = q0 + warp * 16 + g + 8 * h;
        if (row >= p.q_len) continue;
        const float inv = 1.0f / l[h];
        real* out = reinterpret_cast<real*>(const_cast<void*>(p.out.ptr)) + out_row(p, n, row);
#pragma unroll
        for (int c = 0; c < OT; c++) {
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int col = c * 8 + 2 * q4 + j;
                if (col < p.value_dim) out[col] = normalized(o[c][2 * h + j], l[h], inv);
            }
        }
    }
}

// The tensor-core kernels, 64 queries a block (the host side launches them on sm_80 and later).
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_tc_hd32(const AttnParams p) { flash_attention_tc<32>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_tc_hd64(const AttnParams p) { flash_attention_tc<64>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_tc_hd128(const AttnParams p) { flash_attention_tc<128>(p); }

// ---------------------------------------------------------------------------------------------
// bf16 and f16 attention on the tensor cores (sm_80 on): q, k and v are 16-bit, both products
// are `mma.sync.m16n8k16` with float32 accumulators, as FlashAttention-2 runs them; the softmax is
// in float32, and the probabilities are rounded to the operands' dtype for the product with v.
//
// One block owns 128 queries of one batch entry: 8 warps (HALF_THREADS = 256) of 16 query rows
// each, the rows of one mma tile. The keys go by in tiles of BC = 64. For each key tile a warp
//   1. computes its 16 x 64 scores S = Q K^T in the mma's accumulator registers,
//   2. folds them into the online softmax (running maximum m, running sum l, rescaled output o),
//   3. adds P V to its 16 output rows, with P taken straight from the registers of step 1.
// Scores and probabilities never leave registers.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), for
// lane = 4 * g + q4 (g = groupID = lane >> 2, q4 = threadID_in_group = lane & 3), each 32-bit
// register holding two 16-bit elements, the lower index in the low half:
//   A, 16 x 16 row-major: a0 = (row g, cols 2q4, 2q4+1), a1 = (row g+8, the same cols),
//                         a2 = (row g, cols 2q4+8, 2q4+9), a3 = (row g+8, cols 2q4+8, 2q4+9);
//   B, 16 x 8 (k x n):    b0 = (k rows 2q4, 2q4+1, col g), b1 = (k rows 2q4+8, 2q4+9, col g);
//   C, D, 16 x 8 float:   c0 = (g, 2q4), c1 = (g, 2q4+1), c2 = (g+8, 2q4), c3 = (g+8, 2q4+1).
// Every fragment is read from shared memory with `ldmatrix`, which loads 8 x 8 matrices of 16-bit
// elements (one 16-byte row address per lane) and hands each thread exactly these pairs:
//   - q's A fragments: four 8 x 8 matrices of q's rows (`ldmatrix.x4`), read once per block;
//   - k's B fragments: B[d][key] = K[key][d], so the matrices of k's rows, untransposed, are
//     already in the B layout; one `ldmatrix.x4` serves two 8-key tiles;
//   - v's B fragments: B[key][col] = V[key][col] needs two neighbouring keys of one column, so
//     `ldmatrix.x4.trans` transposes the 8 x 8 matrices of v's rows as it loads them.
// And the accumulator of a score tile pair (keys 16kk + 0..7 and 16kk + 8..15) is exactly the A
// operand of P V for those 16 keys: c0, c1 of the first tile make a0, c2, c3 make a1, the second
// tile's make a2 and a3. So P goes from one mma to the next through registers only.
//
// Copies (cp.async, sm_80 on): the copy engine moves 16 bytes a thread from global to shared
// memory without passing through registers, and the thread goes on computing. The k and v tiles
// are double buffered: while the warps compute with tile j in one buffer, tile j + 1 arrives in the
// other, so global-memory latency hides behind the tensor cores. Past the last query, key or
// head-dim element the copies fill zeros (cp.async's source size), so partial tiles need no
// special case: padded keys are masked to -inf, padded head-dim columns add 0 to every product.
//
// Shared memory, 16-bit elements, rows of LD = HD + 8: two buffers, each a k tile [64][LD] followed
// by a v tile [64][LD]. q [128][LD] is read once, into registers, before the first key tile is
// used, so it borrows the second buffer (exactly its size) until then. The 8 padding elements
// (16 bytes) keep every row 16-byte aligned for cp.async and ldmatrix and put the 8 rows that one
// ldmatrix phase reads in 8 different groups of 4 banks, so the reads do not conflict.

#define HALF_WARPS 8
#define HALF_THREADS (32 * HALF_WARPS)

// Starts an asynchronous 16-byte copy from global memory to the shared-window address `to`. Only
// `bytes` (0 to 16) are read from `src`; the rest of the 16 are zero filled, so a copy past the
// end of a tensor reads nothing and leaves zeros. `.cg` caches in L2 only: each tile is read once
// per block.
__device__ __forceinline__ void cp_async16_to(unsigned to, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(bytes));
}

// The same, to a generic pointer into shared memory.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
    cp_async16_to((unsigned)__cvta_generic_to_shared(dst), src, bytes);
}

// Closes the group of the copies this thread started since the last commit (a group may be empty).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most PENDING of this thread's committed groups are still in flight. The data are
// then in shared memory, visible to the other threads after the next __syncthreads().
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// Four 8 x 8 matrices of 16-bit elements from shared memory: lane i gives the address of row i % 8
// of matrix i / 8, and r[j] receives, in each thread (g, q4), elements (row g, cols 2q4, 2q4 + 1)
// of matrix j, or with TRANS (rows 2q4, 2q4 + 1; col g) (PTX ISA, "ldmatrix").
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const unsigned short* row) {
    const unsigned address = (unsigned)__cvta_generic_to_shared(row);
    if (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(address));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(address));
    }
}

// d += a b on the tensor cores, for bf16 or f16 operands (BF16 says which).
template <bool BF16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if (BF16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two floats rounded into one A/B word of the kernel's dtype.
template <bool BF16>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    return BF16 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
}

// Starts copying rows row0 .. row0 + ROWS - 1 of an operand (16-bit elements, read through its
// strides) into shared memory at dst[r * LD + c], zero padded past `rows` rows and `cols` columns.
// Where a row's elements are contiguous and 16-byte aligned (a head of q, k or v split off a
// projection's output by a reshape and a transpose is), each thread starts 16-byte cp.async copies
// of 8 elements, neighbouring threads taking neighbouring pieces of a row so that global reads are
// coalesced; the caller commits and waits for them. Any other layout is copied one element at a
// time through registers: correct, but without the overlap.
template <int ROWS, int COLS, int LD>
__device__ __forceinline__ void half_tile_start(unsigned short* dst, const unsigned short* src, i64 row_stride,
                                                i64 col_stride, int row0, int rows, int cols) {
    const bool vec = col_stride == 1 && (row_stride & 7) == 0 && (reinterpret_cast<unsigned long long>(src) & 15) == 0;
    if (vec) {
        constexpr int PIECES = COLS / 8;  // 16-byte pieces of a row
        static_assert(ROWS * PIECES % HALF_THREADS == 0, "every thread copies the same number of pieces");
        // Kept a loop: unrolled, its addresses would take registers the key loop needs.
#pragma unroll 1
        for (int i = 0; i < ROWS * PIECES / HALF_THREADS; i++) {
            const int idx = threadIdx.x + i * HALF_THREADS, r = idx / PIECES, c = (idx % PIECES) * 8;
            // The elements of this piece that exist: 8, fewer at the end of a row, none past the
            // last row (a zero-byte copy reads nothing, so `src` itself is a safe address).
            const int valid = row0 + r < rows ? max(0, min(8, cols - c)) : 0;
            const unsigned short* from = valid ? src + (i64)(row0 + r) * row_stride + c : src;
            cp_async16(dst + r * LD + c, from, 2 * valid);
        }
        return;
    }
    for (int idx = threadIdx.x; idx < ROWS * COLS; idx += HALF_THREADS) {
        const int r = idx / COLS, c = idx % COLS;
        const bool valid = row0 + r < rows && c < cols;
        dst[r * LD + c] = valid ? src[(i64)(row0 + r) * row_stride + (i64)c * col_stride] : (unsigned short)0;
    }
}

template <int HD, bool BF16>
__device__ void flash_attention_half(const AttnParams& p) {
    constexpr int BR = 16 * HALF_WARPS;  // queries per block, 16 per warp
    constexpr int LD = HD + 8;           // elements between rows of q, k and v in shared memory
    constexpr int NT = BC / 8;           // 8-key tiles of a key tile (the n tiles of S)
    constexpr int OT = HD / 8;           // 8-column tiles of the output (the n tiles of O)
    constexpr int DT = HD / 16;          // 16-element steps of the head dim (the k steps of S)
    static_assert(BR == 2 * BC, "q fills exactly the second k/v buffer it borrows");
    extern __shared__ float4 shared4[];
    unsigned short* tiles = reinterpret_cast<unsigned short*>(shared4);
    // Buffer b: k at tiles + b * 2 * BC * LD, v right after it.
    unsigned short* qs = tiles + 2 * BC * LD;  // [BR][LD], the second buffer until q is in registers

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q4 = lane & 3;
    const i64 n = blockIdx.y;
    // Under `causal` the last query blocks have the most keys to visit: they start first, so that
    // the short blocks, not the long ones, finish the grid.
    const int block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int q0 = block * BR;
    const Entry<unsigned short> at = entry<unsigned short>(p, n);
    const int kv_end = p.causal ? min(p.kv_len, q0 + BR) : p.kv_len;  // a causal block needs no later key

    // Stage 1: q and the first k and v tiles; then each warp loads its 16 rows of q into A
    // fragments, once for the whole key loop (DT fragments of 16 head-dim elements).
    half_tile_start<BR, HD, LD>(qs, at.q, p.q.row_stride, p.q.col_stride, q0, p.q_len, p.head_dim);
    half_tile_start<BC, HD, LD>(tiles, at.k, p.k.row_stride, p.k.col_stride, 0, kv_end, p.head_dim);
    half_tile_start<BC, HD, LD>(tiles + BC * LD, at.v, p.v.row_stride, p.v.col_stride, 0, kv_end, p.value_dim);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    unsigned qf[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++) {
        // Lanes 0-15 address rows 0-15 at column 16 d (matrices a0, a1), lanes 16-31 the same
        // rows at column 16 d + 8 (a2, a3).
        ldmatrix_x4<false>(qf[d], qs + (warp * 16 + (lane & 15)) * LD + d * 16 + (lane >> 4) * 8);
    }
    __syncthreads();  // q is read no more: the second buffer is free for the second key tile

    // This thread's two rows: g and g + 8 of its warp's 16 (index h = 0, 1). l is this thread's
    // share of the row's sum (its 2 of every 8 keys); the quad's shares are added at the end.
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    float o[OT][4];
#pragma unroll
    for (int c = 0; c < OT; c++) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;

    for (int k0 = 0, buf = 0; k0 < kv_end; k0 += BC, buf ^= 1) {
        // Stage 2: start copying the next key tile into the other buffer (read by the previous
        // tile, which every warp has finished: see the __syncthreads() at the end of the loop),
        // then wait for this tile's copies, started one tile ago, to land. The group committed
        // here may be empty (past the last tile); "all but the newest group" is still this tile.
        unsigned short* ks = tiles + buf * 2 * BC * LD;
        unsigned short* vs = ks + BC * LD;
        const int next = k0 + BC;
        if (next < kv_end) {
            unsigned short* kn = tiles + (buf ^ 1) * 2 * BC * LD;
            half_tile_start<BC, HD, LD>(kn, at.k, p.k.row_stride, p.k.col_stride, next, kv_end, p.head_dim);
            half_tile_start<BC, HD, LD>(kn + BC * LD, at.v, p.v.row_stride, p.v.col_stride, next, kv_end, p.value_dim);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();  // every thread's share of this tile is in place

        // Stage 3, scores: s[t][e] is row g + 8 (e / 2), key k0 + 8 t + 2 q4 + e % 2. One
        // ldmatrix.x4 gives the B fragments of key tiles t and t + 1: lanes 0-7 and 8-15 address
        // keys 8 t + 0..7 at head-dim columns 16 d and 16 d + 8 (b0, b1 of tile t), lanes 16-31
        // the same for keys 8 t + 8..15 (tile t + 1).
        float s[NT][4];
#pragma unroll
        for (int t = 0; t < NT; t++) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
        for (int d = 0; d < DT; d++) {
#pragma unroll
            for (int t = 0; t < NT; t += 2) {
                unsigned b[4];
                ldmatrix_x4<false>(b, ks + (t * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + d * 16 + ((lane >> 3) & 1) * 8);
                mma_m16n8k16<BF16>(s[t], qf[d], b[0], b[1]);
                mma_m16n8k16<BF16>(s[t + 1], qf[d], b[2], b[3]);
            }
        }

        // Stage 4, the online softmax over this tile, in base 2: p = exp2(score * scale_log2 - m).
        // A whole tile (no key past the end, none after a query under `causal`, no mask) with a
        // non-negative scale needs no per-element work before the maximum: the maximum of the
        // scaled scores is the scale times the maximum of the raw ones, and each exponent is one
        // fused multiply-add, fmaf(s, scale_log2, -m). Other tiles scale and mask every score
        // first (`masked`) and take exponents with a multiplier of 1.
        const bool whole = !p.mask_kind && k0 + BC <= p.kv_len && (!p.causal || k0 + BC - 1 <= q0) &&
                           p.scale_log2 >= 0.0f;
        const float mul = whole ? p.scale_log2 : 1.0f;
        if (!whole) {
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = q0 + warp * 16 + g + 8 * (e / 2), key = k0 + t * 8 + 2 * q4 + e % 2;
                    s[t][e] = masked(p, at.mask, s[t][e] * p.scale_log2, row, key);
                }
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            // The row's maximum: this thread's 16 scores of it, then its quad's (the 4 threads
            // that share row g + 8 h) with two shuffles.
            float mx = NEG_INF;
#pragma unroll
            for (int t = 0; t < NT; t++) mx = fmaxf(mx, fmaxf(s[t][2 * h], s[t][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[h], mx * mul);
            // While every key so far is masked, m_new is -inf: add nothing (and make no NaN).
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0f : exp2_ftz(m[h] - m_new);  // rescales what was gathered
            float sum = 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; e++) {
                    s[t][e] = none ? 0.0f : exp2_ftz(fmaf(s[t][e], mul, -m_new));
                    sum += s[t][e];
                }
            }
            l[h] = l[h] * alpha + sum;
            m[h] = m_new;
#pragma unroll
            for (int c = 0; c < OT; c++) {
                o[c][2 * h] *= alpha;
                o[c][2 * h + 1] *= alpha;
            }
        }

        // Stage 5, O += P V, sixteen keys at a time: the probabilities, rounded to the dtype, are
        // the A fragment; one ldmatrix.x4.trans gives the B fragments of output column tiles c and
        // c + 1: lanes 0-15 address keys 16 kk + 0..15 at column 8 c (b0, b1 of tile c), lanes
        // 16-31 the same keys at column 8 c + 8 (tile c + 1).
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            const int t0 = 2 * kk, t1 = 2 * kk + 1;
            const unsigned a[4] = {pack2<BF16>(s[t0][0], s[t0][1]), pack2<BF16>(s[t0][2], s[t0][3]),
                                   pack2<BF16>(s[t1][0], s[t1][1]), pack2<BF16>(s[t1][2], s[t1][3])};
#pragma unroll
            for (int c = 0; c < OT; c += 2) {
                unsigned b[4];
                ldmatrix_x4<true>(b, vs + (kk * 16 + (lane & 15)) * LD + (c + (lane >> 4)) * 8);
                mma_m16n8k16<BF16>(o[c], a, b[0], b[1]);
                mma_m16n8k16<BF16>(o[c + 1], a, b[2], b[3]);
            }
        }
        __syncthreads();  // this buffer is read no more: the next tile's copy may overwrite it
    }

    // o[c][e] is row g + 8 (e / 2), column 8 c + 2 q4 + e % 2; the row's sum is its quad's shares.
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = q0 + warp * 16 + g + 8 * h;
        if (row >= p.q_len) continue;
        const float inv = 1.0f / l[h];
        void* out = const_cast<void*>(
            element_ptr(p.out.ptr, BF16 ? DTYPE_BF16 : DTYPE_F16, out_row(p, n, row)));
#pragma unroll
        for (int c = 0; c < OT; c++) {
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int col = c * 8 + 2 * q4 + j;
                if (col < p.value_dim) {
                    store_from_float(out, BF16 ? DTYPE_BF16 : DTYPE_F16, col, normalized(o[c][2 * h + j], l[h], inv));
                }
            }
        }
    }
}

// 128 queries a block, 256 threads; the host side launches them for bf16 and f16 operands on
// sm_80 and later. Head dims 32 and 64 ask for two blocks per multiprocessor (at most 128 registers
// a thread), so that one block's warps compute while the other's wait at a barrier; head dim 128's
// output alone takes 64 registers a thread, so it keeps the compiler's choice.
extern "C" __global__ void __launch_bounds__(HALF_THREADS, 2) flash_attention_bf16_hd32(const AttnParams p) { flash_attention_half<32, true>(p); }
extern "C" __global__ void __launch_bounds__(HALF_THREADS, 2) flash_attention_bf16_hd64(const AttnParams p) { flash_attention_half<64, true>(p); }
extern "C" __global__ void __launch_bounds__(HALF_THREADS) flash_attention_bf16_hd128(const AttnParams p) { flash_attention_half<128, true>(p); }
extern "C" __global__ void __launch_bounds__(HALF_THREADS, 2) flash_attention_f16_hd32(const AttnParams p) { flash_attention_half<32, false>(p); }
extern "C" __global__ void __launch_bounds__(HALF_THREADS, 2) flash_attention_f16_hd64(const AttnParams p) { flash_attention_half<64, false>(p); }
extern "C" __global__ void __launch_bounds__(HALF_THREADS) flash_attention_f16_hd128(const AttnParams p) { flash_attention_half<128, false>(p); }
#endif

// Rows per thread for each head dim: the host side (attention.rs) launches BR = 16 * RT queries
// per block and sizes shared memory to match.
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd32(const AttnParams p) { flash_attention<32, 8>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd64(const AttnParams p) { flash_attention<64, 8>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd128(const AttnParams p) { flash_attention<128, 4>(p); }

// ---------------------------------------------------------------------------------------------
// bf16 and f16 on Hopper's warpgroup MMA (`wgmma`, compute capability 9.0, compiled for sm_90a)
//
// The same online softmax as `flash_attention_half`, with the products on the tensor cores' Hopper
// instructions. A warpgroup (4 warps, 128 threads) issues one `wgmma.mma_async` for a 64 x N x 16
// product (N = 128 keys for the scores, 64 head-dim columns for the output): it reads B, and here
// also A for the scores, straight from shared memory, and runs asynchronously while the warps go
// on until `wgmma.wait_group`. Each warpgroup owns 64 queries; a block of GROUPS warpgroups shares
// the k and v tiles.
//
// The tensor cores read shared memory through a descriptor (start address, the stride between
// groups of 8 rows, and a swizzle mode), so tiles are laid out as they expect: rows of 64 16-bit
// elements (128 bytes) in the 128-byte swizzle, where the 16-byte piece j of row r is stored at
// piece j ^ (r % 8) of that row. Eight rows make a 1024-byte atom; a tile starts on a 1024-byte
// boundary. With that one layout:
//   - q (A of S = q k^T) and k (B of S, as k^T) are "K-major": each row holds the 64 head-dim
//     elements the product sums over; a 16-element step of the sum moves the descriptor 32 bytes;
//   - v (B of O += P v) is "MN-major": its rows are the keys the product sums over, so the
//     instruction reads it transposed (`imm-trans-b`); a 16-key step moves 16 rows, 2048 bytes.
// P never leaves registers: the accumulator layout of S (per warp, the m16n8 layout of `mma.sync`)
// is the register layout of wgmma's A operand, as in `flash_attention_half`.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define WG_ROW_BYTES 128  // one row of a tile: 64 16-bit elements

// Where the 16-byte piece `piece` (0-7) of row `row` of a swizzled tile is, in bytes from its start.
__device__ __forceinline__ int swizzled(int row, int piece) { return row * WG_ROW_BYTES + ((piece ^ (row & 7)) << 4); }

// Starts copying rows row0 .. row0 + ROWS - 1 (64 contiguous 16-bit elements each, `row_stride`
// apart) into the swizzled tile `dst`, zero filled from `rows` on, THREADS_ threads sharing the
// tile's 8 x ROWS 16-byte pieces; the caller commits and waits. A thread copies the same piece of
// rows STEP apart, which share one swizzle: its addresses are worked out once and then stepped,
// and only a tile that crosses `rows` checks each row. (Working every piece's addresses out afresh
// had cost as many instructions a tile as the softmax.)
template <int ROWS, int THREADS_>
__device__ __forceinline__ void wg_tile_start(unsigned char* dst, const unsigned short* src, i64 row_stride, int row0,
                                              int rows) {
    static_assert(THREADS_ % 64 == 0 && ROWS % (THREADS_ / 8) == 0, "every thread copies as many pieces");
    constexpr int STEP = THREADS_ / 8;
    const int row = threadIdx.x >> 3, piece = threadIdx.x & 7;
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst) + swizzled(row, piece);
    const unsigned short* from = src + (i64)(row0 + row) * row_stride + piece * 8;
    const bool whole = row0 + ROWS <= rows;
#pragma unroll
    for (int i = 0; i < ROWS / STEP; i++) {
        const bool valid = whole || row0 + row + i * STEP < rows;
        cp_async16_to(to + i * STEP * WG_ROW_BYTES, valid ? from : src, valid ? 16 : 0);
        from += STEP * row_stride;
    }
}

// The descriptor of a swizzled tile starting at `tile` (PTX ISA, "matrix descriptor"): the start
// address in 16-byte units, the stride between 8-row groups (1024 bytes, bits 32-45, in 16-byte
// units) and the 128-byte swizzle (mode 1 in bits 62-63). The other offset (bits 16-29) steps
// between atoms side by side, which a tile one atom (64 elements) wide does not have; it is set
// to the same 1024. Adding n to a descriptor moves its start 16 n bytes.
__device__ __forceinline__ unsigned long long wg_desc(const void* tile) {
    const unsigned long long address = (unsigned)__cvta_generic_to_shared(tile);
    return ((address & 0x3FFFF) >> 4) | (1024ull >> 4) << 16 | (1024ull >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Keeps the compiler from moving reads or writes of an accumulator across a wgmma's start or end:
// the instruction writes its registers asynchronously, which the compiler cannot see.
template <int N>
__device__ __forceinline__ void wg_hold(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_D "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_OUT "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define WG_KEYS 128  // keys a tile
#define WG_D128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_OUT128 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (+)= a b for a 64 x 128 x 16 product with both operands in shared memory (descriptors): a
// tile's 128 keys of scores at once; `accumulate` 0 overwrites d.
template <bool BF16>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], unsigned long long a, unsigned long long b, int accumulate) {
    if (BF16) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_D128 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : WG_OUT128
                     : "l"(a), "l"(b), "r"(accumulate));
    } else {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WG_D128 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : WG_OUT128
                     : "l"(a), "l"(b), "r"(accumulate));
    }
}

// d += a b for a 64 x 64 x 16 product with A in registers (the m16n8k16 A layout per warp) and B
// read transposed from shared memory.
template <bool BF16>
__device__ __forceinline__ void wgmma_rs_trans(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
    if (BF16) {
        asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                     : WG_OUT
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
    } else {
        asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WG_D ", {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                     : WG_OUT
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
    }
}

// Starts S = q k^T for one tile (q's 64 rows of this warpgroup, WG_KEYS keys): four 16-element
// steps of the head dim, each moving both descriptors 32 bytes. s[4 t + e] is the score of row
// g + 8 (e / 2) of the warp's 16 and key 8 t + 2 q4 + e % 2 of the tile.
template <bool BF16>
__device__ __forceinline__ void wg_scores(float (&s)[WG_KEYS / 2], unsigned long long q_desc,
                                          unsigned long long k_desc) {
#pragma unroll
    for (int d = 0; d < 4; d++) wgmma_ss<BF16>(s, q_desc + 2 * d, k_desc + 2 * d, d);
}

// One tile's step of the online softmax on this thread's scores `s` (rows `first` and first + 8,
// keys key0 + 8 t + e % 2): masks them unless the tile is `whole`, replaces them by the
// probabilities exp2(score - m), and updates the running maxima `m`, sums `l` and output `o`.
__device__ __forceinline__ void wg_softmax(const AttnParams& p, const void* mask, float (&s)[WG_KEYS / 2],
                                           float (&m)[2], float (&l)[2], float (&o)[32], bool whole, int first,
                                           int key0) {
    constexpr int NS = WG_KEYS / 2;  // this thread's scores of the tile
    const float mul = whole ? p.scale_log2 : 1.0f;
    if (!whole) {
#pragma unroll
        for (int i = 0; i < NS; i++) {
            const int row = first + 8 * ((i & 3) / 2), key = key0 + (i >> 2) * 8 + (i & 1);
            s[i] = masked(p, mask, s[i] * p.scale_log2, row, key);
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float mx = NEG_INF;
#pragma unroll
        for (int t = 0; t < NS / 4; t++) mx = fmaxf(mx, fmaxf(s[4 * t + 2 * h], s[4 * t + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx * mul);
        const bool none = m_new == NEG_INF;
        const float alpha = none ? 1.0f : exp2_ftz(m[h] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int t = 0; t < NS / 4; t++) {
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; e++) {
                s[4 * t + e] = none ? 0.0f : exp2_ftz(fmaf(s[4 * t + e], mul, -m_new));
                sum += s[4 * t + e];
            }
        }
        l[h] = l[h] * alpha + sum;
        m[h] = m_new;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            o[4 * c + 2 * h] *= alpha;
            o[4 * c + 2 * h + 1] *= alpha;
        }
    }
}

// Head dim 64 (q, k and v rows of exactly 64 contiguous, 16-byte aligned elements: the host side
// checks), GROUPS warpgroups of 64 queries, keys WG_KEYS at a time in STAGES buffers of k and v.
template <bool BF16, int GROUPS, int STAGES>
__device__ void flash_attention_wgmma(const AttnParams& p) {
    constexpr int THREADS_ = 128 * GROUPS;
    constexpr int BR = 64 * GROUPS;            // queries per block
    constexpr int KEYS = WG_KEYS;              // keys per tile
    constexpr int TILE = KEYS * WG_ROW_BYTES;  // bytes of a k or a v tile
    extern __shared__ float4 shared4[];
    // The tiles start on a 1024-byte boundary of the shared window (the host asks for 1 KiB more).
    unsigned char* raw = reinterpret_cast<unsigned char*>(shared4);
    unsigned char* qs = raw + ((1024 - ((unsigned)__cvta_generic_to_shared(raw) & 1023)) & 1023);
    unsigned char* kv = qs + BR * WG_ROW_BYTES;  // buffer b: k at kv + 2 b TILE, v after it

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp >> 2;               // this warp's warpgroup
    const int g = lane >> 2, q4 = lane & 3;
    const i64 n = blockIdx.y;
    const int block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int q0 = block * BR;
    const Entry<unsigned short> at = entry<unsigned short>(p, n);
    const int kv_end = p.causal ? min(p.kv_len, q0 + BR) : p.kv_len;

    // Stages 0 .. STAGES - 2 start now, q with the first; one commit group per stage.
    wg_tile_start<BR, THREADS_>(qs, at.q, p.q.row_stride, q0, p.q_len);
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st * KEYS < kv_end) {
            wg_tile_start<KEYS, THREADS_>(kv + st * 2 * TILE, at.k, p.k.row_stride, st * KEYS, kv_end);
            wg_tile_start<KEYS, THREADS_>(kv + st * 2 * TILE + TILE, at.v, p.v.row_stride, st * KEYS, kv_end);
        }
        cp_async_commit();
    }

    // This thread's rows of the block's queries: 16 per warp, g and g + 8 of them (h = 0, 1).
    const int first = q0 + 16 * warp + g;
    const unsigned long long q_desc = wg_desc(qs + group * 64 * WG_ROW_BYTES);
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
    float o[32];
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = 0.0f;

    for (int k0 = 0, j = 0; k0 < kv_end; k0 += KEYS, j++) {
        unsigned char* ks = kv + (j % STAGES) * 2 * TILE;
        unsigned char* vs = ks + TILE;
        // Start tile j + STAGES - 1 into the buffers tile j - 1 used (every warp has finished with
        // them: the barrier at the end of the last step), then wait for tile j: one commit group
        // per tile, maybe empty, so tile j has landed once STAGES - 1 newer groups may be pending.
        const int ahead = k0 + (STAGES - 1) * KEYS;
        if (ahead < kv_end) {
            unsigned char* kn = kv + ((j + STAGES - 1) % STAGES) * 2 * TILE;
            wg_tile_start<KEYS, THREADS_>(kn, at.k, p.k.row_stride, ahead, kv_end);
            wg_tile_start<KEYS, THREADS_>(kn + TILE, at.v, p.v.row_stride, ahead, kv_end);
        }
        cp_async_commit();
        cp_async_wait<STAGES - 1>();
        // The copies wrote through the generic proxy; the tensor cores read through the async one.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();

        float s[KEYS / 2];
        wg_fence();
        wg_scores<BF16>(s, q_desc, wg_desc(ks));
        wg_commit();
        wg_wait_all();
        wg_hold(s);

        const bool whole = !p.mask_kind && k0 + KEYS <= p.kv_len && (!p.causal || k0 + KEYS - 1 <= q0) &&
                           p.scale_log2 >= 0.0f;
        wg_softmax(p, at.mask, s, m, l, o, whole, first, k0 + 2 * q4);

        // O += P v, 16 keys a step.
        const unsigned long long v_desc = wg_desc(vs);
        wg_hold(o);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++) {
            const unsigned a[4] = {pack2<BF16>(s[8 * kk], s[8 * kk + 1]), pack2<BF16>(s[8 * kk + 2], s[8 * kk + 3]),
                                   pack2<BF16>(s[8 * kk + 4], s[8 * kk + 5]), pack2<BF16>(s[8 * kk + 6], s[8 * kk + 7])};
            wgmma_rs_trans<BF16>(o, a, v_desc + kk * (16 * WG_ROW_BYTES >> 4));
        }
        wg_commit();
        wg_wait_all();
        wg_hold(o);
        __syncthreads();  // tile j's buffers are read no more
    }

#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const int row = first + 8 * h;
        if (row >= p.q_len) continue;
        const float inv = 1.0f / l[h];
        void* out = const_cast<void*>(
            element_ptr(p.out.ptr, BF16 ? DTYPE_BF16 : DTYPE_F16, out_row(p, n, row)));
#pragma unroll
        for (int c = 0; c < 8; c++) {
            const int col = c * 8 + 2 * q4;
            reinterpret_cast<unsigned*>(out)[col / 2] =
                pack2<BF16>(normalized(o[4 * c + 2 * h], l[h], inv), normalized(o[4 * c + 2 * h + 1], l[h], inv));
        }
    }
}

// One warpgroup a block, 128 keys a tile (`m64n128k16` score products) and two k/v buffers: 73
// KiB of shared memory and at most 168 registers a thread (the launch bound's 3) let three blocks
// share a multiprocessor, so that while one warpgroup waits for its products or its copies,
// others take their softmax. Tiles of 64 keys (five blocks a multiprocessor, 96 registers) ran 3
// to 5% slower on an H100 (bench/NOTES-precision.md compares the shapes tried). The host side
// (tuned/attention.rs) launches these on compute capability 9.0 only and sizes their shared
// memory for `WGMMA_KEYS`, which must equal WG_KEYS.
extern "C" __global__ void __launch_bounds__(128, 3) flash_attention_wgmma_bf16_hd64(const AttnParams p) { flash_attention_wgmma<true, 1, 2>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) flash_attention_wgmma_f16_hd64(const AttnParams p) { flash_attention_wgmma<false, 1, 2>(p); }
#endif
