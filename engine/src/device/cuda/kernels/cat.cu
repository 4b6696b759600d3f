// `torch.cat` of dense inputs in one launch (engine/src/device/cuda/cat.rs). The output is seen
// as `rows` rows of `out_row` elements (rows: the dims before `dim`); input `k` fills the band
// of columns `[start[k], start[k] + width[k])` of every row. One launch covers up to
// CAT_MAX_INPUTS inputs, the band `[first, last)` of columns they fill.

#define CAT_MAX_INPUTS 8

struct CatParams {
    const float* src[CAT_MAX_INPUTS];
    long long width[CAT_MAX_INPUTS];
    long long start[CAT_MAX_INPUTS];
    float* out;
    long long rows;
    long long out_row;
    long long first;
    long long last;
    int count;
};

extern "C" __global__ void cat_dense(CatParams p) {
    const long long band = p.last - p.first;
    const long long total = p.rows * band;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long row = i / band;
        const long long col = p.first + (i - row * band);
        int k = 0;
        while (k + 1 < p.count && col >= p.start[k + 1]) {
            k++;
        }
        p.out[row * p.out_row + col] = p.src[k][row * p.width[k] + (col - p.start[k])];
    }
}
