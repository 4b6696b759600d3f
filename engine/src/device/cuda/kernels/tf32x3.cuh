// A float32 product on the tensor cores as three TF32 products (the "3xTF32" method), shared by
// the tensor-core GEMM (tf32x3_gemm.cu) and attention (attention.cu); the source module puts this
// in front of each.
//
// TF32 is float32 with a 10-bit mantissa, what the tensor cores multiply. Each float32 operand is
// split into `big`, its TF32 rounding, and `small = x - big` (exact in float32), which TF32 holds
// to about 11 more bits; `a * b` is then `big_a*big_b + big_a*small_b + small_a*big_b`, and the
// dropped `small_a*small_b` is 2^-22 of the product or less. Sums stay in float32 accumulators.
//
// TF32 `mma.sync` needs compute capability 8.0 (Ampere) or later; older GPUs compile none of this.

#if __CUDA_ARCH__ >= 800
typedef unsigned int u32;

// Splits x into `big`, x rounded to TF32's 10-bit mantissa (to nearest, ties away from zero, by
// integer arithmetic: `cvt.rna.tf32.f32` runs on the slow conversion pipe and measured a bottleneck
// in the GEMM), and `small = x - big`. The tensor core reads only the top 19 bits of `small`,
// dropping 2^-21 of x at most.
__device__ __forceinline__ void split(float x, u32& big, u32& small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}

// c += a b for one 16x8 tile, `a` 16x8 and `b` 8x8 in TF32, in the fragment layouts of
// `mma.sync.m16n8k8`.
__device__ __forceinline__ void mma(float* c, const u32* a, const u32* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c[i][j] += a[i] b[j] for M x N tiles, as three TF32 products in three passes over the tiles, so
// that no mma waits on the one just issued for the same accumulators.
template <int M, int N>
__device__ __forceinline__ void mma3(float (*c)[N][4], const u32 (*a_big)[4], const u32 (*a_small)[4],
                                     const u32 (*b_big)[2], const u32 (*b_small)[2]) {
#pragma unroll
    for (int i = 0; i < M; i++)
#pragma unroll
        for (int j = 0; j < N; j++) mma(c[i][j], a_small[i], b_big[j]);
#pragma unroll
    for (int i = 0; i < M; i++)
#pragma unroll
        for (int j = 0; j < N; j++) mma(c[i][j], a_big[i], b_small[j]);
#pragma unroll
    for (int i = 0; i < M; i++)
#pragma unroll
        for (int j = 0; j < N; j++) mma(c[i][j], a_big[i], b_big[j]);
}
#endif
