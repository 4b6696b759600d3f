// A matrix product of few rows, `out = a @ w^T (+ bias) (then ReLU)`, for a linear layer at batch
// 1 to 16: the analogue of the GEMV-like templates Inductor picks for such shapes instead of a
// library GEMM.
//
// Why a kernel of our own: with 1 to 16 rows the product is a read of the weight (4 MB for a
// 512 x 2048 layer) and almost no arithmetic, so it is bound by memory and should take about as long
// as reading the weight once. Library GEMMs tile for many rows: at batch 1 cuBLAS measured 5-8 us
// per layer on the H100, where reading 4 MB at the copy rate takes about 1.4 us.
//
// Layout: a block of 128 threads owns COLS output columns and every row of them. Its threads split
// the reduction dimension `k` between them (thread t reads elements 4t .. 4t+3 of each 512-element
// stretch), so every block reads its weight rows whole, coalesced, and the whole grid reads the
// weight once, with many loads in flight on every SM. The few rows of `a` are read by every block
// from L2 (16 rows of 2048 floats are 128 KB); with more rows a block takes more columns, so that
// each load of `a` serves several. The row count is a template parameter (1, 4 or 16): work for
// rows that are not there, even predicated off, measured 1.5-2x slower at batch 1.
//
// Each thread ends with a partial sum for each (row, column) pair. A warp adds them up with the
// "transposing" shuffle sum: at each of the five shuffle steps every lane keeps half of its values
// and adds the partner lane's matching half, so the 64 sums of a warp cost 62 shuffles instead of
// 64 x 5. The four warps then add their results through shared memory, and the epilogue (bias,
// ReLU) is applied as each output is written.
//
// The host side is engine/src/device/cuda/skinny_gemm.rs; LinearParams is in linear_params.cuh.

#define THREADS 128
#define WARPS (THREADS / 32)

// Adds four products of a float4 of `a` and one of `w` to `acc`.
__device__ __forceinline__ float dot4(float acc, float4 x, float4 y) {
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
    acc = fmaf(x.z, y.z, acc);
    return fmaf(x.w, y.w, acc);
}

// Sums each of a lane's N values over the warp, halving the values a lane holds at each step
// (lanes with bit O set keep the upper half): after the steps down to offset 1, lane l holds
// the sums of values (l * N / 32) .. when N >= 32, or of value l / (32 / N) when N < 32.
template <int N, int O>
__device__ __forceinline__ void fold(float* v, int lane) {
    if constexpr (N > 1) {
        const bool upper = (lane & O) != 0;
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
            const float send = upper ? v[i] : v[i + N / 2];
            const float keep = upper ? v[i + N / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
        }
        if constexpr (O > 1) fold<N / 2, O / 2>(v, lane);
    } else {
        v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
        if constexpr (O > 1) fold<1, O / 2>(v, lane);
    }
}

// VEC: `k`, both row strides and both pointers allow float4 loads.
template <int ROWS, int COLS, bool VEC>
__device__ __forceinline__ void skinny_gemm_body(const LinearParams& p) {
    constexpr int V = ROWS * COLS;        // partial sums a thread holds, acc[r * COLS + c]
    constexpr int HELD = V >= 32 ? V / 32 : 1;  // sums a lane holds after the warp's fold
    __shared__ float partial[WARPS][V];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int first = blockIdx.x * COLS;
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; i++) acc[i] = 0.0f;
    // Columns past the end read the last column again and are not written: no branch in the loop.
    const float* wc[COLS];
#pragma unroll
    for (int c = 0; c < COLS; c++) wc[c] = p.w + (i64)min(first + c, p.n - 1) * p.w_row_stride;
    if (VEC) {
#pragma unroll 2
        for (int k = 4 * threadIdx.x; k < p.k; k += 4 * THREADS) {
            float4 w4[COLS];
#pragma unroll
            for (int c = 0; c < COLS; c++) w4[c] = __ldg(reinterpret_cast<const float4*>(wc[c] + k));
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                if (r < p.rows) {
                    const float4 a4 = __ldg(reinterpret_cast<const float4*>(p.a + r * p.a_row_stride + k));
#pragma unroll
                    for (int c = 0; c < COLS; c++) acc[r * COLS + c] = dot4(acc[r * COLS + c], a4, w4[c]);
                }
            }
        }
    } else {
        for (int k = threadIdx.x; k < p.k; k += THREADS) {
            float wk[COLS];
#pragma unroll
            for (int c = 0; c < COLS; c++) wk[c] = __ldg(wc[c] + k);
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                if (r < p.rows) {
                    const float ak = __ldg(p.a + r * p.a_row_stride + k);
#pragma unroll
                    for (int c = 0; c < COLS; c++) acc[r * COLS + c] = fmaf(ak, wk[c], acc[r * COLS + c]);
                }
            }
        }
    }
    fold<V, 16>(acc, lane);
    if constexpr (V >= 32) {
#pragma unroll
        for (int j = 0; j < HELD; j++) partial[warp][lane * HELD + j] = acc[j];
    } else if (lane % (32 / V) == 0) {
        partial[warp][lane / (32 / V)] = acc[0];
    }
    __syncthreads();
    const int t = threadIdx.x;
    if (t < V) {
        const int r = t / COLS, col = first + t % COLS;
        if (r < p.rows && col < p.n) {
            float v = 0.0f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) v += partial[w][t];
            if (p.bias != nullptr) v += p.bias[col];
            if (p.relu) v = fmaxf(v, 0.0f);
            p.out[(i64)r * p.n + col] = v;
        }
    }
}

// ROWS: the most rows the kernel takes (1, 4 or 16; it computes that many and writes `rows`); the
// host side picks the smallest that fits, and COLS by the rows and `k` (see skinny_gemm.rs).
#define SKINNY_GEMM(NAME, ROWS, COLS, VEC)                                     \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(LinearParams p) { \
        skinny_gemm_body<ROWS, COLS, VEC>(p);                                  \
    }

SKINNY_GEMM(skinny_gemm_r1_c1, 1, 1, false)
SKINNY_GEMM(skinny_gemm_r4_c2, 4, 2, false)
SKINNY_GEMM(skinny_gemm_r16_c2, 16, 2, false)
SKINNY_GEMM(skinny_gemm_r16_c4, 16, 4, false)
SKINNY_GEMM(skinny_gemm_r1_c1_vec4, 1, 1, true)
SKINNY_GEMM(skinny_gemm_r4_c2_vec4, 4, 2, true)
SKINNY_GEMM(skinny_gemm_r16_c2_vec4, 16, 2, true)
SKINNY_GEMM(skinny_gemm_r16_c4_vec4, 16, 4, true)
