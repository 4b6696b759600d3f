//! The reductions a GPU with an H100's 132 multiprocessors splits, shared by the test that compiles
//! their CUDA here and the test that runs them on a GPU.

use engine::{Result, Tensor};

/// A function with one reduction, as a graph `explain` can capture.
pub type Model = fn(Vec<Tensor>) -> Result<Tensor>;

/// Each case: the function, its inputs' shapes, and how many reduction kernels its split takes
/// (2: partial results and their total; 3: a remainder the partials leave, reduced by a third).
/// A loss's mean over 2 M elements (256 blocks of 8192), bias gradients over a batch of 4096 (64
/// parts of 64 rows), a max over 2 M elements, a mean over rows of 100 000 (80 parts of 1250), and
/// a prime length along rows and alone (264 parts of 3787, the 235 elements left over reduced by a
/// third kernel).
pub fn split_reduction_cases() -> Vec<(Model, Vec<Vec<usize>>, usize)> {
    vec![
        (|t| t[0].mse_loss(&t[1]), vec![vec![4096, 512], vec![4096, 512]], 2),
        (|t| t[0].sum(0, false), vec![vec![4096, 2048]], 2),
        (|t| t[0].relu()?.mul(&t[1])?.sum(0, false), vec![vec![4096, 512], vec![4096, 512]], 2),
        (|t| t[0].amax(0, false), vec![vec![1 << 21]], 2),
        (|t| t[0].mean(1, true)?.exp(), vec![vec![3, 100_000]], 2),
        (|t| t[0].sum(1, false), vec![vec![1, 1_000_003]], 3),
        (|t| t[0].mean(0, false), vec![vec![1_000_003]], 3),
    ]
}
