// Scaled dot-product attention, flash-attention style (Dao et al., 2022), in f32: the analogue
// of the forward kernel behind PyTorch's `scaled_dot_product_attention`.
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
// ptr + (n / inner) * outer_stride + (n % inner) * inner_stride + row * row_stride + col * col_stride.
struct AttnOperand {
    const real* ptr;
    i64 outer_stride;
    i64 inner_stride;
    i64 row_stride;
    i64 col_stride;
};

struct AttnParams {
    AttnOperand q, k, v, mask;
    real* out;   // dense [batch, q_len, value_dim]
    i64 inner;   // the size that n % inner refers to (the heads)
    int q_len, kv_len, head_dim, value_dim;
    float scale_log2;  // scale * log2(e): exponentials are taken as exp2
    int mask_kind;     // 0 none, 1 boolean (nonzero keeps), 2 additive
    int causal;        // query i sees keys j <= i
};

__device__ __forceinline__ const real* batch_ptr(const AttnOperand& a, i64 n, i64 inner) {
    return a.ptr + (n / inner) * a.outer_stride + (n % inner) * a.inner_stride;
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
    const real* qp = batch_ptr(p.q, n, p.inner);
    const real* kp = batch_ptr(p.k, n, p.inner);
    const real* vp = batch_ptr(p.v, n, p.inner);
    const real* mp = p.mask_kind ? batch_ptr(p.mask, n, p.inner) : 0;

    // q^T and the first k^T tile, zero padded past the last query or key and the head dim; the
    // first v tile arrives while the first scores are computed.
    const int kv_end = p.causal ? min(p.kv_len, q0 + BR) : p.kv_len;  // a causal block needs no later key
    tile_start<BR, HD, 0>(qs, 1, BR, qp, p.q.row_stride, p.q.col_stride, q0, p.q_len, p.head_dim);
    tile_start<BC, HD, 0>(ks, 1, BC, kp, p.k.row_stride, p.k.col_stride, 0, kv_end, p.head_dim);
    tile_wait();
    tile_start<BC, HD, 1>(vs, HD, 1, vp, p.v.row_stride, p.v.col_stride, 0, kv_end, p.value_dim);
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
                if (!whole) {
                    if (key >= p.kv_len || (p.causal && key > row)) {
                        x = NEG_INF;
                    } else if (p.mask_kind && row < p.q_len) {
                        const float mv = mp[row * p.mask.row_stride + key * p.mask.col_stride];
                        x = p.mask_kind == 1 ? (mv != 0.0f ? x : NEG_INF) : fmaf(mv, LOG2E, x);
                    }
                }
                s[i][j] = x;
                tile_max = fmaxf(tile_max, x);
            }
            const float m_new = fmaxf(m[i], row_max(tile_max));
            // While every key so far is masked, m_new is -inf: add nothing (and make no NaN).
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0f : exp2f(m[i] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                s[i][j] = none ? 0.0f : exp2f(s[i][j] - m_new);
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
        if (next < kv_end) tile_start<BC, HD, 0>(ks, 1, BC, kp, p.k.row_stride, p.k.col_stride, next, kv_end, p.head_dim);

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
        if (next < kv_end) tile_start<BC, HD, 1>(vs, HD, 1, vp, p.v.row_stride, p.v.col_stride, next, kv_end, p.value_dim);
    }

#pragma unroll
    for (int i = 0; i < RT; ++i) {
        const int row = q0 + ty * RT + i;
        if (row >= p.q_len) continue;
        // A row whose keys are all masked has l == 0 and o == 0: 0/0 is NaN, as PyTorch's math path.
        const float inv = 1.0f / l[i];
        real* out = p.out + (n * p.q_len + row) * (i64)p.value_dim;
#pragma unroll
        for (int c = 0; c < OC; ++c) {
            const int col = column(tx, c);
            if (col < p.value_dim) out[col] = l[i] == 0.0f ? o[i][c] / l[i] : o[i][c] * inv;
        }
    }
}

// Rows per thread for each head dim: the host side (attention.rs) launches BR = 16 * RT queries
// per block and sizes shared memory to match.
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd32(const AttnParams p) { flash_attention<32, 8>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd64(const AttnParams p) { flash_attention<64, 8>(p); }
extern "C" __global__ void __launch_bounds__(THREADS) flash_attention_hd128(const AttnParams p) { flash_attention<128, 4>(p); }
