// One launch of a linear layer's product, `out = a @ w^T (+ bias) (then ReLU)`, as the engine's
// own GEMM kernels take it (skinny_gemm.cu, tf32x3_gemm.cu); the source module puts this in front
// of each. Its #[repr(C)] twin is LinearParams in engine/src/device/cuda/linear_gemm.rs.

typedef long long i64;

struct LinearParams {
    const float* a;      // a[r, k] at a + r * a_row_stride + k
    const float* w;      // w[c, k] at w + c * w_row_stride + k: the weight, read as b[k, c]
    const float* bias;   // bias[c], or null
    float* out;          // out[r, c] at out + r * n + c
    i64 a_row_stride;
    i64 w_row_stride;
    int rows, n, k;
    int relu;            // clamp at zero after the bias
};
