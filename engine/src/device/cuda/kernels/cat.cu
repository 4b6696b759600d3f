// `torch.cat` of dense inputs in one launch (engine/src/device/cuda/cat.rs). The output is seen
// as `rows` rows of `out_row` elements (rows: the dims before `dim`); input `k` fills the band
// of columns `[start[k], start[k] + width[k])` of every row. One launch covers up to
// CAT_MAX_INPUTS inputs, the band `[first, last)` of columns they fill. Sizes are in units of
// the element the kernel moves: one element of 1, 2 or 4 bytes (whatever the dtype, a copy moves
// bits), or 16 bytes of them when every band and row allows.

#define CAT_MAX_INPUTS 8

struct CatParams {
    const void* src[CAT_MAX_INPUTS];
    long long width[CAT_MAX_INPUTS];
    long long start[CAT_MAX_INPUTS];
    void* out;
    long long rows;
    long long out_row;
    long long first;
    long long last;
    int count;
};

template <typename T>
__device__ void cat_body(const CatParams& p) {
    const long long band = p.last - p.first;
    const long long total = p.rows * band;
    const long long stride = (long long)gridDim.x * blockDim.x;
    T* out = reinterpret_cast<T*>(p.out);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long row = i / band;
        const long long col = p.first + (i - row * band);
        int k = 0;
        while (k + 1 < p.count && col >= p.start[k + 1]) {
            k++;
        }
        out[row * p.out_row + col] = reinterpret_cast<const T*>(p.src[k])[row * p.width[k] + (col - p.start[k])];
    }
}

extern "C" __global__ void cat_dense1(CatParams p) { cat_body<unsigned char>(p); }

extern "C" __global__ void cat_dense2(CatParams p) { cat_body<unsigned short>(p); }

extern "C" __global__ void cat_dense4(CatParams p) { cat_body<float>(p); }

extern "C" __global__ void cat_dense16(CatParams p) { cat_body<float4>(p); }
