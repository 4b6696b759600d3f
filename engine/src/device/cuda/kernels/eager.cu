// The engine's eager CUDA kernels, the analogue of ATen's CUDA kernels: one kernel per op, each
// one pass over memory, reading any strided or broadcast layout.
//
// This file is compiled by NVRTC for the device's exact architecture, after a prelude generated
// from the op catalogue (engine/src/device/cuda/source.rs) that defines
//   MAX_DIMS                      the most dimensions a strided kernel indexes,
//   op_<name>(x), op_<name>(a, b) each catalogue op's scalar function (from engine/src/op.rs),
//   FOR_EACH_UNARY(X), FOR_EACH_BINARY(X)  the op names, to stamp out one kernel per op.
//
// Parameter structs are mirrored field for field by #[repr(C)] structs in
// engine/src/device/cuda/params.rs; change both together.

typedef long long i64;
typedef unsigned int u32;

#define NEG_INF __int_as_float(0xff800000)

// ---------------------------------------------------------------------------------------------
// Operands and indexing

// One input of a dense pointwise kernel: `ptr` to n contiguous floats, or (ptr == 0) `value`
// everywhere, which is how scalars and absent operands are passed.
struct DenseIn {
    const float* ptr;
    float value;
};

// One input of a strided pointwise kernel: its strides along the output's (collapsed) dims,
// innermost first; 0 for broadcast dims. ptr == 0 means `value` everywhere.
struct StridedIn {
    const float* ptr;
    float value;
    i64 strides[MAX_DIMS];
};

// A shape, innermost dimension first, with precomputed magic numbers so that 31-bit indices can
// be split into coordinates with a multiply and a shift instead of a division (ATen's IntDivider).
struct Geometry {
    int rank;
    int small;  // every linear index fits in 31 bits: use the fast division
    i64 sizes[MAX_DIMS];
    u32 magic[MAX_DIMS];
    u32 shift[MAX_DIMS];
};

__device__ __forceinline__ u32 fast_div(u32 n, u32 magic, u32 shift) {
    return (__umulhi(n, magic) + n) >> shift;
}

// The coordinates of row-major linear index `i`, innermost first. Loops are unrolled over
// MAX_DIMS so that parameter arrays are indexed by constants and stay out of local memory.
__device__ __forceinline__ void unravel(const Geometry& g, i64 i, i64 (&coord)[MAX_DIMS]) {
    if (g.small) {
        u32 rest = (u32)i;
#pragma unroll
        for (int d = 0; d < MAX_DIMS; ++d) {
            if (d < g.rank) {
                u32 q = fast_div(rest, g.magic[d], g.shift[d]);
                coord[d] = rest - q * (u32)g.sizes[d];
                rest = q;
            } else {
                coord[d] = 0;
            }
        }
    } else {
        i64 rest = i;
#pragma unroll
        for (int d = 0; d < MAX_DIMS; ++d) {
            if (d < g.rank) {
                coord[d] = rest % g.sizes[d];
                rest /= g.sizes[d];
            } else {
                coord[d] = 0;
            }
        }
    }
}

__device__ __forceinline__ i64 offset_of(const i64 (&coord)[MAX_DIMS], const i64 (&strides)[MAX_DIMS]) {
    i64 offset = 0;
#pragma unroll
    for (int d = 0; d < MAX_DIMS; ++d) offset += coord[d] * strides[d];
    return offset;
}

__device__ __forceinline__ i64 global_thread() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 grid_threads() { return (i64)gridDim.x * blockDim.x; }

// ---------------------------------------------------------------------------------------------
// Pointwise: every kernel takes three inputs (unused ones are zero scalars) so that one host
// launcher serves unary, binary and ternary ops.

__device__ __forceinline__ float load1(const DenseIn& in, i64 i) { return in.ptr ? __ldg(in.ptr + i) : in.value; }

__device__ __forceinline__ float4 load4(const DenseIn& in, i64 i) {
    if (in.ptr) return __ldg(reinterpret_cast<const float4*>(in.ptr) + i);
    return make_float4(in.value, in.value, in.value, in.value);
}

// Contiguous inputs and output: 16-byte loads and stores when every pointer is aligned (`vec`),
// a grid-stride loop, then the scalar tail.
template <typename F>
__device__ __forceinline__ void pointwise_dense(float* __restrict__ out, const DenseIn& a, const DenseIn& b,
                                                const DenseIn& c, i64 n, int vec, F f) {
    const i64 step = grid_threads();
    i64 start = 0;
    if (vec) {
        const i64 n4 = n >> 2;
        for (i64 j = global_thread(); j < n4; j += step) {
            const float4 x = load4(a, j), y = load4(b, j), z = load4(c, j);
            reinterpret_cast<float4*>(out)[j] =
                make_float4(f(x.x, y.x, z.x), f(x.y, y.y, z.y), f(x.z, y.z, z.z), f(x.w, y.w, z.w));
        }
        start = n4 << 2;
    }
    for (i64 j = start + global_thread(); j < n; j += step) out[j] = f(load1(a, j), load1(b, j), load1(c, j));
}

__device__ __forceinline__ float load_strided(const StridedIn& in, const i64 (&coord)[MAX_DIMS]) {
    return in.ptr ? __ldg(in.ptr + offset_of(coord, in.strides)) : in.value;
}

// Any layout: each output index is split into coordinates once, then each input's offset is a dot
// product with its strides. The output is dense, so stores stay coalesced.
template <typename F>
__device__ __forceinline__ void pointwise_strided(float* __restrict__ out, const StridedIn& a, const StridedIn& b,
                                                  const StridedIn& c, const Geometry& g, i64 n, F f) {
    const i64 step = grid_threads();
    for (i64 i = global_thread(); i < n; i += step) {
        i64 coord[MAX_DIMS];
        unravel(g, i, coord);
        out[i] = f(load_strided(a, coord), load_strided(b, coord), load_strided(c, coord));
    }
}

#define POINTWISE_KERNELS(kernel, expr)                                                                    \
    extern "C" __global__ void kernel##_dense(float* __restrict__ out, DenseIn a, DenseIn b, DenseIn c, i64 n, \
                                              int vec) {                                                   \
        pointwise_dense(out, a, b, c, n, vec, [](float x, float y, float z) { return expr; });             \
    }                                                                                                      \
    extern "C" __global__ void kernel##_strided(float* __restrict__ out, StridedIn a, StridedIn b, StridedIn c, \
                                                Geometry g, i64 n) {                                       \
        pointwise_strided(out, a, b, c, g, n, [](float x, float y, float z) { return expr; });             \
    }

#define UNARY_KERNELS(name) POINTWISE_KERNELS(unary_##name, op_##name(x))
#define BINARY_KERNELS(name) POINTWISE_KERNELS(binary_##name, op_##name(x, y))

FOR_EACH_UNARY(UNARY_KERNELS)
FOR_EACH_BINARY(BINARY_KERNELS)
POINTWISE_KERNELS(where, (x != 0.0f ? y : z))
POINTWISE_KERNELS(copy, x)

// ---------------------------------------------------------------------------------------------
// Warp and block reductions

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

// Softmax's running statistics: the largest value seen and the sum of exp(x - max).
struct MaxSum {
    float max;
    float sum;
};

__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int mask) { return {shfl_xor(v.max, mask), shfl_xor(v.sum, mask)}; }

template <typename T, typename C>
__device__ __forceinline__ T warp_allreduce(T v, C combine) {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) v = combine(v, shfl_xor(v, mask));
    return v;
}

// Every thread of a one-dimensional block (a multiple of 32 threads) gets the combination of all
// threads' values. `smem` holds at least 32 values.
template <typename T, typename C>
__device__ __forceinline__ T block_allreduce(T v, C combine, T identity, T* smem) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_allreduce(v, combine);
    __syncthreads();  // a previous call may still be reading smem
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    return warp_allreduce(lane < warps ? smem[lane] : identity, combine);
}

struct SumOp {
    static __device__ __forceinline__ float identity() { return 0.0f; }
    static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
};

// NaN wins, as in torch.amax.
struct MaxOp {
    static __device__ __forceinline__ float identity() { return NEG_INF; }
    static __device__ __forceinline__ float combine(float a, float b) { return (b > a || b != b) ? b : a; }
};

// ---------------------------------------------------------------------------------------------
// Reductions over one dimension of any layout, into a dense output.
//
// Outputs are numbered 0..n_out in row-major order of the kept dims; `outputs` maps an output
// number to the offset of its first input element. Two mappings of threads to work:
//  ROWS     (the reduced dim has stride 1): blockDim.x threads share one output's row, loading
//           consecutive (16-byte when `vec`) elements; blockDim.y rows per block.
//  COLUMNS  (neighbouring outputs are neighbours in memory): blockDim.x = 32 threads take 32
//           neighbouring outputs, so every load is coalesced; blockDim.y threads split the row.
// gridDim.y > 1 splits each row into chunks of `chunk` elements when there are too few outputs to
// fill the GPU; each chunk then writes a partial result to out[blockIdx.y * n_out + output], and
// a second launch reduces the partials.

struct ReduceArgs {
    const float* in;
    float* out;
    i64 n_out;
    i64 size;        // length of the reduced dim
    i64 stride;      // its stride in the input
    i64 chunk;       // elements of the reduced dim per grid row (gridDim.y)
    float scale;     // applied to each result: 1/size for a mean, else 1
    int columns;     // 1: COLUMNS mapping, 0: ROWS
    int vec;         // ROWS with stride 1 and 16-byte aligned rows: float4 loads
    Geometry outputs;
    i64 output_strides[MAX_DIMS];
};

__device__ __forceinline__ i64 output_base(const ReduceArgs& p, i64 o) {
    i64 coord[MAX_DIMS];
    unravel(p.outputs, o, coord);
    return offset_of(coord, p.output_strides);
}

template <typename Op>
__device__ __forceinline__ void reduce_rows(const ReduceArgs& p, i64 begin, i64 end, float* out) {
    __shared__ float smem[32];
    const int tx = threadIdx.x, warps_per_row = blockDim.x >> 5;
    const int lane = tx & 31, warp = tx >> 5;
    // Every thread runs the same number of iterations, so the barriers below are uniform.
    for (i64 first = (i64)blockIdx.x * blockDim.y; first < p.n_out; first += (i64)gridDim.x * blockDim.y) {
        const i64 o = first + threadIdx.y;
        float acc = Op::identity();
        if (o < p.n_out) {
            const float* row = p.in + output_base(p, o);
            if (p.vec) {
                const float4* row4 = reinterpret_cast<const float4*>(row + begin);
                const i64 n4 = (end - begin) >> 2;
#pragma unroll 4
                for (i64 j = tx; j < n4; j += blockDim.x) {
                    const float4 v = __ldg(row4 + j);
                    acc = Op::combine(Op::combine(acc, v.x), Op::combine(v.y, Op::combine(v.z, v.w)));
                }
                for (i64 j = begin + (n4 << 2) + tx; j < end; j += blockDim.x) acc = Op::combine(acc, __ldg(row + j));
            } else {
#pragma unroll 4
                for (i64 j = begin + tx; j < end; j += blockDim.x) acc = Op::combine(acc, __ldg(row + j * p.stride));
            }
        }
        acc = warp_allreduce(acc, Op::combine);
        if (warps_per_row > 1) {
            __syncthreads();
            if (lane == 0) smem[threadIdx.y * warps_per_row + warp] = acc;
            __syncthreads();
            if (warp == 0) {
                acc = lane < warps_per_row ? smem[threadIdx.y * warps_per_row + lane] : Op::identity();
                acc = warp_allreduce(acc, Op::combine);
            }
        }
        if (tx == 0 && o < p.n_out) out[o] = acc * p.scale;
    }
}

template <typename Op>
__device__ __forceinline__ void reduce_columns(const ReduceArgs& p, i64 begin, i64 end, float* out) {
    __shared__ float smem[32][33];  // padded: the column-wise reads below hit 32 different banks
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 first = (i64)blockIdx.x * 32; first < p.n_out; first += (i64)gridDim.x * 32) {
        const i64 o = first + tx;
        float acc = Op::identity();
        if (o < p.n_out) {
            const float* column = p.in + output_base(p, o);
#pragma unroll 4
            for (i64 j = begin + ty; j < end; j += blockDim.y) acc = Op::combine(acc, __ldg(column + j * p.stride));
        }
        __syncthreads();
        smem[ty][tx] = acc;
        __syncthreads();
        if (ty == 0) {
            for (int k = 1; k < blockDim.y; ++k) acc = Op::combine(acc, smem[k][tx]);
            if (o < p.n_out) out[o] = acc * p.scale;
        }
    }
}

template <typename Op>
__device__ __forceinline__ void reduce(const ReduceArgs& p) {
    const i64 begin = (i64)blockIdx.y * p.chunk;
    const i64 end = min(p.size, begin + p.chunk);
    float* out = p.out + (i64)blockIdx.y * p.n_out;
    if (p.columns) {
        reduce_columns<Op>(p, begin, end, out);
    } else {
        reduce_rows<Op>(p, begin, end, out);
    }
}

extern "C" __global__ void reduce_sum(ReduceArgs p) { reduce<SumOp>(p); }
extern "C" __global__ void reduce_max(ReduceArgs p) { reduce<MaxOp>(p); }

// ---------------------------------------------------------------------------------------------
// Softmax and log-softmax as single kernels, like ATen's: one read of each row for its statistics
// (the running max and the sum of exp(x - max), rescaled whenever the max grows), one read and one
// write to produce the result. Rows of a block stay in L2 between the two reads.

__device__ __forceinline__ MaxSum online_add(MaxSum s, float v) {
    if (v > s.max) {
        s.sum = s.sum * expf(s.max - v) + 1.0f;  // expf(-inf) = 0 for the first element
        s.max = v;
    } else if (v > NEG_INF) {
        s.sum += expf(v - s.max);
    } else if (v != v) {
        s.sum = v;  // NaN poisons the row, as in the reference
    }
    return s;
}

__device__ __forceinline__ MaxSum online_combine(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    const float sa = a.max == NEG_INF ? (a.sum != a.sum ? a.sum : 0.0f) : a.sum * expf(a.max - m);
    const float sb = b.max == NEG_INF ? (b.sum != b.sum ? b.sum : 0.0f) : b.sum * expf(b.max - m);
    return {m, sa + sb};
}

__device__ __forceinline__ float softmax_value(float v, MaxSum s, float log_sum, int log) {
    return log ? v - s.max - log_sum : expf(v - s.max) / s.sum;
}

// One block per row of `size` contiguous elements (the softmax dim is the last one).
extern "C" __global__ void softmax_rows(const float* __restrict__ in, float* __restrict__ out, i64 rows, i64 size,
                                        int log, int vec) {
    __shared__ MaxSum smem[32];
    const MaxSum empty = {NEG_INF, 0.0f};
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* x = in + r * size;
        float* y = out + r * size;
        MaxSum s = empty;
        const i64 n4 = vec ? size >> 2 : 0;
        for (i64 j = threadIdx.x; j < n4; j += blockDim.x) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x) + j);
            s = online_add(online_add(online_add(online_add(s, v.x), v.y), v.z), v.w);
        }
        for (i64 j = (n4 << 2) + threadIdx.x; j < size; j += blockDim.x) s = online_add(s, __ldg(x + j));
        s = block_allreduce(s, online_combine, empty, smem);
        const float log_sum = logf(s.sum);
        for (i64 j = threadIdx.x; j < n4; j += blockDim.x) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x) + j);
            reinterpret_cast<float4*>(y)[j] =
                make_float4(softmax_value(v.x, s, log_sum, log), softmax_value(v.y, s, log_sum, log),
                            softmax_value(v.z, s, log_sum, log), softmax_value(v.w, s, log_sum, log));
        }
        for (i64 j = (n4 << 2) + threadIdx.x; j < size; j += blockDim.x) y[j] = softmax_value(x[j], s, log_sum, log);
    }
}

// The softmax dim is not the last: one thread per (outer, inner) line, so that neighbouring
// threads read neighbouring addresses.
extern "C" __global__ void softmax_columns(const float* __restrict__ in, float* __restrict__ out, i64 outer,
                                           i64 size, i64 inner, int log) {
    for (i64 i = global_thread(); i < outer * inner; i += grid_threads()) {
        const i64 base = (i / inner) * size * inner + i % inner;
        MaxSum s = {NEG_INF, 0.0f};
        for (i64 k = 0; k < size; ++k) s = online_add(s, __ldg(in + base + k * inner));
        const float log_sum = logf(s.sum);
        for (i64 k = 0; k < size; ++k) out[base + k * inner] = softmax_value(in[base + k * inner], s, log_sum, log);
    }
}

// ---------------------------------------------------------------------------------------------
// Layer norm over the last dim, one block per row: the mean, then the variance around it (two
// reductions, the second reading the row again from L2, which is exact where one-pass sums of
// squares lose digits), then the normalised, scaled and shifted row.

extern "C" __global__ void layer_norm_rows(const float* __restrict__ in, const float* __restrict__ weight,
                                           const float* __restrict__ bias, float* __restrict__ out, i64 rows,
                                           i64 size, float eps) {
    __shared__ float smem[32];
    const auto add = [](float a, float b) { return a + b; };
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* x = in + r * size;
        float sum = 0.0f;
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) sum += __ldg(x + j);
        const float mean = block_allreduce(sum, add, 0.0f, smem) / (float)size;
        float squares = 0.0f;
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            const float d = x[j] - mean;
            squares += d * d;
        }
        const float var = block_allreduce(squares, add, 0.0f, smem) / (float)size;
        const float inv_std = 1.0f / sqrtf(var + eps);
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            out[r * size + j] = (x[j] - mean) * inv_std * __ldg(weight + j) + __ldg(bias + j);
        }
    }
}
