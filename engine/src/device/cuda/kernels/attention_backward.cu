// The backward of scaled dot-product attention, flash-attention style (Dao, 2023, FlashAttention-2):
// no [L, S] matrix of scores or probabilities is stored; each kernel recomputes the scores it
// needs from q and k, and the probabilities from each query row's log-sum-exp. The analogue of the
// kernels behind ATen's `_scaled_dot_product_flash_attention_backward`, in f32 on CUDA cores.
//
// With P = softmax(S), S = scale * q k^T (+ mask), out = P v and g the output's gradient:
//   dv = P^T g,   dP = g v^T,   dS = P * (dP - D) with D_i = g_i . out_i,
//   dq = scale * dS k,   dk = scale * dS^T q.
// Three kernels, each a warp per row so that no two warps write one row (no atomics):
//   attention_backward_stats: per query row, the log-sum-exp of its scores and D_i;
//   attention_backward_dq:    per query row, dq_i = scale * sum_j dS_ij k_j;
//   attention_backward_dkdv:  per key row, dk_j = scale * sum_i dS_ij q_i and dv_j = sum_i P_ij g_i.
// A warp visits the other side 32 rows at a time: lane t computes the score (and dS) of row t of
// the tile, then the 32 values are broadcast one by one (__shfl_sync) while every lane adds its
// slice of the row (elements t, t + 32, ...) into the accumulator it keeps in registers. The
// warp's own row (q_i and g_i, or k_j and v_j) waits in shared memory for the dot products.
//
// Operands are read in place through their strides, as the forward kernel reads them; the host
// side is engine/src/device/cuda/attention_backward.rs, whose #[repr(C)] AttnBackwardParams
// mirrors the struct below field for field.

typedef long long i64;
typedef float real;

#define NEG_INF __int_as_float(0xff800000)
#define WARPS 4
#define MAX_HD 128
#define PER_LANE (MAX_HD / 32)

// A batch of matrices: element (n, row, col) is at
// ptr + (n / inner) * outer_stride + (n % inner) * inner_stride + row * row_stride + col * col_stride.
struct AttnOperand {
    const real* ptr;
    i64 outer_stride;
    i64 inner_stride;
    i64 row_stride;
    i64 col_stride;
};

struct AttnBackwardParams {
    AttnOperand grad_out, q, k, v, out, mask;
    real* dq;     // dense [batch, q_len, head_dim]
    real* dk;     // dense [batch, kv_len, head_dim]
    real* dv;     // dense [batch, kv_len, value_dim]
    float* stats; // dense [batch, q_len, 2]: log-sum-exp and D of each query row
    i64 inner;
    i64 batch;
    int q_len, kv_len, head_dim, value_dim;
    float scale;
    int mask_kind;  // 0 none, 1 boolean (nonzero keeps), 2 additive
    int causal;     // query i sees keys j <= i
};

__device__ __forceinline__ real at(const AttnOperand& a, i64 n, i64 inner, i64 row, i64 col) {
    return a.ptr[(n / inner) * a.outer_stride + (n % inner) * a.inner_stride + row * a.row_stride + col * a.col_stride];
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// The score of query i against key j of batch entry n from their dot product: scaled, then
// masked as the forward masks it.
__device__ __forceinline__ float masked(const AttnBackwardParams& p, i64 n, int i, int j, float dot) {
    if (p.causal && j > i) return NEG_INF;
    float s = dot * p.scale;
    if (p.mask_kind == 1 && at(p.mask, n, p.inner, i, j) == 0.0f) return NEG_INF;
    if (p.mask_kind == 2) s += at(p.mask, n, p.inner, i, j);
    return s;
}

// The score of query i against key j; `qi` is query i in shared memory.
__device__ __forceinline__ float score(const AttnBackwardParams& p, i64 n, int i, int j, const float* qi) {
    float dot = 0.0f;
    for (int e = 0; e < p.head_dim; ++e) dot += qi[e] * at(p.k, n, p.inner, j, e);
    return masked(p, n, i, j, dot);
}

// The row a warp owns among `batch * len` rows (a query's or a key's): its batch entry `n` and
// its index within the entry; `valid` is false for the warps past the last row.
struct WarpRow {
    int lane, warp;
    i64 row, n;
    int index;
    bool valid;
};

__device__ __forceinline__ WarpRow warp_row(const AttnBackwardParams& p, int len) {
    WarpRow r;
    r.lane = threadIdx.x % 32;
    r.warp = threadIdx.x / 32;
    r.row = (i64)blockIdx.x * WARPS + r.warp;
    r.valid = r.row < p.batch * len;
    r.n = r.row / len;
    r.index = (int)(r.row % len);
    return r;
}

// Loads row `row` of operand `a` (batch entry n, `width` elements) into shared `dst`, warp-wide.
__device__ __forceinline__ void load_row(const AttnOperand& a, i64 n, i64 inner, int row, int width, float* dst) {
    for (int e = threadIdx.x % 32; e < width; e += 32) dst[e] = at(a, n, inner, row, e);
    __syncwarp();
}

extern "C" __global__ void attention_backward_stats(AttnBackwardParams p) {
    __shared__ float rows[WARPS][MAX_HD];
    const WarpRow r = warp_row(p, p.q_len);
    if (!r.valid) return;
    const int lane = r.lane, i = r.index;
    const i64 n = r.n, row = r.row;
    float* qi = rows[r.warp];
    load_row(p.q, n, p.inner, i, p.head_dim, qi);
    // Each lane keeps a running maximum and sum over its keys; the warp then merges them.
    float m = NEG_INF, l = 0.0f;
    for (int j = lane; j < p.kv_len; j += 32) {
        float s = score(p, n, i, j, qi);
        if (s == NEG_INF) continue;
        float m_new = fmaxf(m, s);
        l = l * __expf(m - m_new) + __expf(s - m_new);
        m = m_new;
    }
    float m_all = warp_max(m);
    float l_all = warp_sum(m == NEG_INF ? 0.0f : l * __expf(m - m_all));
    float d = 0.0f;
    for (int e = lane; e < p.value_dim; e += 32) d += at(p.grad_out, n, p.inner, i, e) * at(p.out, n, p.inner, i, e);
    d = warp_sum(d);
    if (lane == 0) {
        p.stats[row * 2] = m_all == NEG_INF ? NEG_INF : m_all + __logf(l_all);
        p.stats[row * 2 + 1] = d;
    }
}

extern "C" __global__ void attention_backward_dq(AttnBackwardParams p) {
    __shared__ float rows[WARPS][2 * MAX_HD];
    const WarpRow r = warp_row(p, p.q_len);
    if (!r.valid) return;
    const int lane = r.lane, i = r.index;
    const i64 n = r.n, row = r.row;
    float* qi = rows[r.warp];
    float* gi = rows[r.warp] + MAX_HD;
    load_row(p.q, n, p.inner, i, p.head_dim, qi);
    load_row(p.grad_out, n, p.inner, i, p.value_dim, gi);
    const float lse = p.stats[row * 2], d = p.stats[row * 2 + 1];
    float acc[PER_LANE];
#pragma unroll
    for (int t = 0; t < PER_LANE; ++t) acc[t] = 0.0f;
    for (int tile = 0; tile < p.kv_len; tile += 32) {
        const int j = tile + lane;
        float ds = 0.0f;
        if (j < p.kv_len && lse != NEG_INF) {
            float s = score(p, n, i, j, qi);
            float prob = s == NEG_INF ? 0.0f : __expf(s - lse);
            float dp = 0.0f;
            for (int e = 0; e < p.value_dim; ++e) dp += gi[e] * at(p.v, n, p.inner, j, e);
            ds = prob * (dp - d);
        }
        const int count = min(32, p.kv_len - tile);
        for (int t = 0; t < count; ++t) {
            const float ds_t = __shfl_sync(0xffffffffu, ds, t);
            if (ds_t == 0.0f) continue;
#pragma unroll
            for (int u = 0; u < PER_LANE; ++u) {
                const int e = lane + 32 * u;
                if (e < p.head_dim) acc[u] += ds_t * at(p.k, n, p.inner, tile + t, e);
            }
        }
    }
    real* dst = p.dq + row * p.head_dim;
#pragma unroll
    for (int u = 0; u < PER_LANE; ++u) {
        const int e = lane + 32 * u;
        if (e < p.head_dim) dst[e] = p.scale * acc[u];
    }
}

extern "C" __global__ void attention_backward_dkdv(AttnBackwardParams p) {
    __shared__ float rows[WARPS][2 * MAX_HD];
    const WarpRow r = warp_row(p, p.kv_len);
    if (!r.valid) return;
    const int lane = r.lane, j = r.index;
    const i64 n = r.n, row = r.row;
    float* kj = rows[r.warp];
    float* vj = rows[r.warp] + MAX_HD;
    load_row(p.k, n, p.inner, j, p.head_dim, kj);
    load_row(p.v, n, p.inner, j, p.value_dim, vj);
    float dk[PER_LANE], dv[PER_LANE];
#pragma unroll
    for (int u = 0; u < PER_LANE; ++u) dk[u] = dv[u] = 0.0f;
    // A causal key is seen only by the queries from j on.
    const int first = p.causal ? j : 0;
    for (int tile = first; tile < p.q_len; tile += 32) {
        const int i = tile + lane;
        float prob = 0.0f, ds = 0.0f;
        if (i < p.q_len) {
            const float lse = p.stats[(n * p.q_len + i) * 2], d = p.stats[(n * p.q_len + i) * 2 + 1];
            if (lse != NEG_INF) {
                float dot = 0.0f;
                for (int e = 0; e < p.head_dim; ++e) dot += at(p.q, n, p.inner, i, e) * kj[e];
                const float s = masked(p, n, i, j, dot);
                prob = s == NEG_INF ? 0.0f : __expf(s - lse);
                float dp = 0.0f;
                for (int e = 0; e < p.value_dim; ++e) dp += at(p.grad_out, n, p.inner, i, e) * vj[e];
                ds = prob * (dp - d);
            }
        }
        const int count = min(32, p.q_len - tile);
        for (int t = 0; t < count; ++t) {
            const float prob_t = __shfl_sync(0xffffffffu, prob, t);
            const float ds_t = __shfl_sync(0xffffffffu, ds, t);
            if (prob_t == 0.0f && ds_t == 0.0f) continue;
#pragma unroll
            for (int u = 0; u < PER_LANE; ++u) {
                const int e = lane + 32 * u;
                if (e < p.value_dim) dv[u] += prob_t * at(p.grad_out, n, p.inner, tile + t, e);
                if (e < p.head_dim) dk[u] += ds_t * at(p.q, n, p.inner, tile + t, e);
            }
        }
    }
#pragma unroll
    for (int u = 0; u < PER_LANE; ++u) {
        const int e = lane + 32 * u;
        if (e < p.head_dim) p.dk[row * p.head_dim + e] = p.scale * dk[u];
        if (e < p.value_dim) p.dv[row * p.value_dim + e] = dv[u];
    }
}
