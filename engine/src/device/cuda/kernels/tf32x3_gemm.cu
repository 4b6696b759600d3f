// A float32 matrix product on tensor cores, `out = a @ w^T (+ bias) (then ReLU)`, with the
// accuracy of float32: the analogue of the GEMM templates Inductor's max-autotune times against
// cuBLAS, and of the "3xTF32" kernels CUTLASS offers for float32 work.
//
// Why: the H100's float32 units peak near 60 TFLOP/s, and cuBLAS's float32 GEMM measured 47 there,
// while its tensor cores multiply TF32 about eight times faster. One TF32 product loses precision,
// which is why PyTorch leaves TF32 off by default; three restore it (tf32x3.cuh says how). Its
// error is about that of an ordinary float32 GEMM (engine/tests/tf32x3_gemm.rs holds it against a
// float64 reference).
//
// Layout: a block computes a BM x BN tile of `out` with 4 or 8 warps, each a WM x WN piece of it,
// as 16x8 tiles of the `mma.sync.m16n8k8` TF32 instruction. Both operands have `k` contiguous (`a`
// by rows, the weight `w[n, k]` as `linear` stores it), so a tile of each is BK floats wide, copied
// to shared memory with `cp.async` STAGES - 1 slices ahead of the one being multiplied. A thread
// reads four consecutive `k` of a row as one float4 (see the main loop for why that is allowed),
// and rows are 16 floats more than a multiple of 32 apart, so those reads hit every bank once.
// Rows and columns past the edges are filled with zeros and not written.
//
// Measured on the H100 (float32 operands, against cuBLAS's float32 GEMM on the same data): 53-59
// TFLOP/s and 1.2-1.36x cuBLAS's speed on the MLP's and the large transformer block's products,
// with a smaller error against float64 than cuBLAS's; slower than cuBLAS where few blocks cover
// the output and `k` is long (512 x 512 x 2048), which max-autotune's timing sorts out.
//
// The host side is engine/src/device/cuda/tf32x3_gemm.rs; LinearParams is in linear_params.cuh,
// `split` and `mma3` in tf32x3.cuh.

// Copies 16 bytes from global to shared memory without passing through registers; `bytes` 0
// fills them with zeros instead (a row past the edge).
__device__ __forceinline__ void copy16(float* shared, const float* global, int bytes) {
    const u32 to = (u32)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global), "r"(bytes));
}

// The same for 4 bytes, for operands whose rows are not 16-byte aligned.
__device__ __forceinline__ void copy4(float* shared, const float* global, int bytes) {
    const u32 to = (u32)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(global), "r"(bytes));
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct Tile {
    static constexpr int WARPS_N = BN / WN;
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    // Floats between rows in shared memory: 16 more than a multiple of 32, so that the 8 float4s a
    // quarter-warp loads (rows g and g + 1, four k each) cover the 32 banks once.
    static constexpr int LD = BK % 32 == 16 ? BK : BK + 16;
    static constexpr int STAGE = (BM + BN) * LD;       // floats of one stage (a's rows, then w's)
    static constexpr int MI = WM / 16, NI = WN / 8;    // mma tiles of a warp
    static constexpr int SHARED_BYTES = STAGES * STAGE * 4;
};

// Starts the copy of the k-slice starting at `k0` of a's and w's tiles into `stage`, 16 bytes at a
// time when VEC (`k`, the row strides and the pointers allow it), else 4.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool VEC>
__device__ __forceinline__ void load_stage(const LinearParams& p, float* stage, int row0, int col0, int k0) {
    using T = Tile<BM, BN, BK, WM, WN, STAGES>;
    constexpr int WIDTH = VEC ? 4 : 1;  // floats a copy moves
    constexpr int COPIES = BK / WIDTH;  // copies per row of a tile
    static_assert((BM + BN) * COPIES % T::THREADS == 0, "every thread makes as many copies");
#pragma unroll
    for (int j = 0; j < (BM + BN) * COPIES / T::THREADS; j++) {
        const int i = threadIdx.x + j * T::THREADS;
        const int r = i / COPIES, k = k0 + (i % COPIES) * WIDTH;
        const bool is_a = r < BM;
        const int g = is_a ? row0 + r : col0 + r - BM;  // the global row of a, or of w
        const bool inside = g < (is_a ? p.rows : p.n) && k < p.k;
        // An outside copy still needs a valid address: the operand's first element.
        const float* from = is_a ? p.a : p.w;
        if (inside) from += g * (is_a ? p.a_row_stride : p.w_row_stride) + k;
        float* to = stage + r * T::LD + (i % COPIES) * WIDTH;
        if (VEC) {
            copy16(to, from, inside ? 16 : 0);
        } else {
            copy4(to, from, inside ? 4 : 0);
        }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool VEC>
__device__ __forceinline__ void tf32x3_gemm_body(const LinearParams& p) {
    using T = Tile<BM, BN, BK, WM, WN, STAGES>;
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = lane >> 2, quad = lane & 3;  // the mma fragments' row and column roles
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp_row = (warp / T::WARPS_N) * WM, warp_col = (warp % T::WARPS_N) * WN;
    float acc[T::MI][T::NI][4] = {};

    const int slices = (p.k + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < slices) load_stage<BM, BN, BK, WM, WN, STAGES, VEC>(p, shared + s * T::STAGE, row0, col0, s * BK);
        asm volatile("cp.async.commit_group;\n");
    }
    for (int slice = 0; slice < slices; slice++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();
        // The stage multiplied one step ago is free for the slice STAGES - 1 ahead.
        const int ahead = slice + STAGES - 1;
        if (ahead < slices) {
            load_stage<BM, BN, BK, WM, WN, STAGES, VEC>(p, shared + (ahead % STAGES) * T::STAGE, row0, col0, ahead * BK);
        }
        asm volatile("cp.async.commit_group;\n");

        // The tensor core rounds its sums toward zero, a bias that grows with the number of sums
        // into one accumulator; each slice is summed apart and added with an ordinary rounding add.
        float part[T::MI][T::NI][4] = {};
        const float* as = shared + (slice % STAGES) * T::STAGE + warp_row * T::LD + 4 * quad;
        const float* ws = shared + (slice % STAGES) * T::STAGE + (BM + warp_col) * T::LD + 4 * quad;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // Sixteen k at a time, as one float4 a row per thread: thread `quad` takes k = 4 quad
            // .. 4 quad + 3, two for each of two mma steps. An mma adds its 8 products in any
            // order, so which k plays which fragment role does not matter as long as a and w agree.
            float4 a_raw[T::MI][2], w_raw[T::NI];
#pragma unroll
            for (int mi = 0; mi < T::MI; mi++) {
                a_raw[mi][0] = *reinterpret_cast<const float4*>(as + (mi * 16 + group) * T::LD + kk);
                a_raw[mi][1] = *reinterpret_cast<const float4*>(as + (mi * 16 + group + 8) * T::LD + kk);
            }
#pragma unroll
            for (int ni = 0; ni < T::NI; ni++) w_raw[ni] = *reinterpret_cast<const float4*>(ws + (ni * 8 + group) * T::LD + kk);
#pragma unroll
            for (int step = 0; step < 2; step++) {
                u32 a_big[T::MI][4], a_small[T::MI][4], w_big[T::NI][2], w_small[T::NI][2];
#pragma unroll
                for (int mi = 0; mi < T::MI; mi++) {
                    split(step ? a_raw[mi][0].z : a_raw[mi][0].x, a_big[mi][0], a_small[mi][0]);
                    split(step ? a_raw[mi][1].z : a_raw[mi][1].x, a_big[mi][1], a_small[mi][1]);
                    split(step ? a_raw[mi][0].w : a_raw[mi][0].y, a_big[mi][2], a_small[mi][2]);
                    split(step ? a_raw[mi][1].w : a_raw[mi][1].y, a_big[mi][3], a_small[mi][3]);
                }
#pragma unroll
                for (int ni = 0; ni < T::NI; ni++) {
                    split(step ? w_raw[ni].z : w_raw[ni].x, w_big[ni][0], w_small[ni][0]);
                    split(step ? w_raw[ni].w : w_raw[ni].y, w_big[ni][1], w_small[ni][1]);
                }
                mma3<T::MI, T::NI>(part, a_big, a_small, w_big, w_small);
            }
        }
#pragma unroll
        for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
            for (int ni = 0; ni < T::NI; ni++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[mi][ni][e] += part[mi][ni][e];
    }
    asm volatile("cp.async.wait_group 0;\n");

    // Fragment element e of tile (mi, ni) is row group (+8 for e >= 2), columns 2 * quad (+1).
#pragma unroll
    for (int mi = 0; mi < T::MI; mi++) {
#pragma unroll
        for (int ni = 0; ni < T::NI; ni++) {
            const int col = col0 + warp_col + ni * 8 + 2 * quad;
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int row = row0 + warp_row + mi * 16 + group + 8 * half;
                if (row >= p.rows) continue;
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    if (col + j >= p.n) continue;
                    float v = acc[mi][ni][2 * half + j];
                    if (p.bias != nullptr) v += p.bias[col + j];
                    if (p.relu) v = fmaxf(v, 0.0f);
                    p.out[(i64)row * p.n + col + j] = v;
                }
            }
        }
    }
}

// The tile shapes the host side may pick (see tf32x3_gemm.rs), each with 16-byte copies (`_vec4`)
// and without; a name gives BM x BN x BK.
#define TF32X3_GEMM(NAME, BM, BN, BK, WM, WN, STAGES, VEC)                                     \
    extern "C" __global__ void __launch_bounds__(Tile<BM, BN, BK, WM, WN, STAGES>::THREADS)     \
        NAME(LinearParams p) {                                                                   \
        tf32x3_gemm_body<BM, BN, BK, WM, WN, STAGES, VEC>(p);                                    \
    }
#define TF32X3_GEMMS(NAME, BM, BN, BK, WM, WN, STAGES)              \
    TF32X3_GEMM(NAME, BM, BN, BK, WM, WN, STAGES, false)           \
    TF32X3_GEMM(NAME##_vec4, BM, BN, BK, WM, WN, STAGES, true)

TF32X3_GEMMS(tf32x3_gemm_64x64x32, 64, 64, 32, 32, 32, 3)
TF32X3_GEMMS(tf32x3_gemm_64x64x16, 64, 64, 16, 32, 32, 4)
TF32X3_GEMMS(tf32x3_gemm_128x64x16, 128, 64, 16, 32, 32, 4)
TF32X3_GEMMS(tf32x3_gemm_64x128x16, 64, 128, 16, 32, 32, 4)
