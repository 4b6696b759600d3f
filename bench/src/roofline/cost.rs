//! What a kernel must do, from its op and shapes: floating-point operations and the fewest bytes
//! it must move (each input read once, each output written once, in its dtype: 4 bytes an element
//! in f32, 2 in bf16 or f16). These are the two numbers that place a kernel on a roofline.
//!
//! Conventions, stated once: every arithmetic operation and every transcendental function (exp,
//! tanh, erf, sin) counts as one flop per element, as a FLOP counter reading the source would
//! count it; views and copies do no arithmetic. A transcendental costs a CPU tens of
//! instructions, so chains of them can sit far below both roofs: that gap is the lesson, not an
//! error of the count.

use engine::DType;
use engine::inductor::output_code::KernelCode;

/// Work and traffic of one kernel launch.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cost {
    /// Floating-point operations.
    pub flops: f64,
    /// Fewest bytes moved to and from memory.
    pub bytes: f64,
}

impl Cost {
    /// Flops per byte, where the kernel sits on the roofline's x axis.
    pub fn intensity(&self) -> f64 {
        self.flops / self.bytes
    }
}

/// Flops per element of one op of the catalogue, by name (eager ops and the ops Inductor's
/// kernels record as their origins).
fn flops_per_element(op: &str) -> f64 {
    match op {
        "reshape" | "permute" | "expand" | "slice" | "contiguous" | "copy" | "cat" | "placeholder" | "output" => 0.0,
        // x * 0.5 * (1 + erf(x / sqrt 2))
        "gelu" => 5.0,
        // 1 / (1 + exp(-x))
        "sigmoid" => 4.0,
        // max, subtract, exp, sum, divide
        "softmax" | "log_softmax" => 5.0,
        // two means, subtract, square, add eps, sqrt, divide, scale, shift
        "layer_norm" => 8.0,
        _ => 1.0,
    }
}

fn numel(shape: &[usize]) -> f64 {
    shape.iter().product::<usize>() as f64
}

/// The cost of an eager op from its name and input shapes (as the profiler records them), its
/// elements of `dtype`, or `None` for an op with no arithmetic (copies), which a roofline cannot
/// place. Reductions are taken over the last dimension, as every workload here reduces.
pub fn eager(op: &str, shapes: &[Vec<usize>], dtype: DType) -> Option<Cost> {
    let element = dtype.size_in_bytes() as f64;
    let per_element = flops_per_element(op);
    if per_element == 0.0 || shapes.is_empty() {
        return None;
    }
    let inputs: f64 = shapes.iter().map(|s| numel(s)).sum();
    let first = &shapes[0];
    let row = *first.last().unwrap_or(&1) as f64;
    Some(match op {
        "matmul" => {
            let [a, b] = shapes else { return None };
            let (m, k, n) = (a[a.len() - 2] as f64, a[a.len() - 1] as f64, b[b.len() - 1] as f64);
            let batch = numel(&a[..a.len() - 2]).max(numel(&b[..b.len() - 2]));
            Cost { flops: 2.0 * batch * m * n * k, bytes: element * (inputs + batch * m * n) }
        }
        // Two products per (query, key) pair, `q @ k^T` and `p @ v`, and the softmax between them
        // (five flops a score); the scores are never stored, so only q, k, v and the output move.
        "scaled_dot_product_attention" => {
            let [q, k, v, ..] = shapes else { return None };
            let (batch, queries, keys) = (numel(&q[..q.len() - 2]), q[q.len() - 2] as f64, k[k.len() - 2] as f64);
            let (head_dim, value_dim) = (q[q.len() - 1] as f64, v[v.len() - 1] as f64);
            let scores = batch * queries * keys;
            let flops = 2.0 * scores * (head_dim + value_dim) + flops_per_element("softmax") * scores;
            Cost { flops, bytes: element * (inputs + batch * queries * value_dim) }
        }
        "sum" | "mean" | "amax" => Cost { flops: numel(first), bytes: element * (numel(first) + numel(first) / row) },
        "softmax" | "log_softmax" | "layer_norm" => {
            Cost { flops: per_element * numel(first), bytes: element * (inputs + numel(first)) }
        }
        // Pointwise: the output has the broadcast shape, as many elements as the largest input.
        _ => {
            let out = shapes.iter().map(|s| numel(s)).fold(0.0, f64::max);
            Cost { flops: per_element * out, bytes: element * (inputs + out) }
        }
    })
}

/// The cost of one of Inductor's generated kernels from its output code: every buffer argument
/// moved once, in its dtype, and each op it fused applied once per element of its largest buffer
/// (a pointwise kernel's output, a reduction's input). `None` for a kernel that only copies.
pub fn compiled(kernel: &KernelCode) -> Option<Cost> {
    let elements = kernel.args.iter().map(|a| a.elements).max().unwrap_or(0) as f64;
    let flops: f64 = kernel.origins.iter().map(|o| flops_per_element(o.op)).sum::<f64>() * elements;
    let bytes: f64 = kernel.args.iter().map(|a| (a.elements * a.dtype.size_in_bytes()) as f64).sum();
    (flops > 0.0 && bytes > 0.0).then_some(Cost { flops, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_counts_two_flops_per_multiply_add_and_three_matrices() {
        let cost = eager("matmul", &[vec![2, 4, 8], vec![2, 8, 3]], DType::F32).unwrap();
        assert_eq!(cost.flops, 2.0 * 2.0 * 4.0 * 3.0 * 8.0);
        assert_eq!(cost.bytes, 4.0 * (64.0 + 48.0 + 24.0));
    }

    #[test]
    fn pointwise_ops_read_inputs_and_write_the_broadcast_output() {
        let add = eager("add", &[vec![4, 8], vec![8]], DType::F32).unwrap();
        assert_eq!((add.flops, add.bytes), (32.0, 4.0 * (32.0 + 8.0 + 32.0)));
        let sum = eager("sum", &[vec![4, 8]], DType::F32).unwrap();
        assert_eq!((sum.flops, sum.bytes), (32.0, 4.0 * (32.0 + 4.0)));
        assert_eq!(eager("contiguous", &[vec![4, 8]], DType::F32), None);
        // In bf16 the same op moves half the bytes.
        assert_eq!(eager("add", &[vec![4, 8], vec![8]], DType::BF16).unwrap().bytes, add.bytes / 2.0);
        assert!(add.intensity() < 1.0, "pointwise ops are memory-bound by construction");
        assert_eq!(eager("cat", &[vec![4, 8], vec![4, 8]], DType::F32), None);
    }

    #[test]
    fn attention_counts_both_products_and_no_score_traffic() {
        let (q, kv) = (vec![2, 3, 16, 8], vec![2, 3, 32, 8]);
        let cost = eager("scaled_dot_product_attention", &[q.clone(), kv.clone(), kv], DType::F32).unwrap();
        let scores = 2.0 * 3.0 * 16.0 * 32.0;
        assert_eq!(cost.flops, 2.0 * scores * 16.0 + 5.0 * scores);
        assert_eq!(cost.bytes, 4.0 * (768.0 + 2.0 * 1536.0 + 768.0));
    }
}
