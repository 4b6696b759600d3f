//! Phase 3's four models that break their graphs (given; re-exported as `models`), and what they
//! share. Each exercise rewrites one of them so that it compiles into one graph with the same outputs.

use std::sync::Mutex;

use engine::{Result, Tensor};

/// The models' width.
pub const WIDTH: usize = 16;

/// The weights the models share.
pub struct Model {
    /// `[WIDTH, WIDTH]`
    pub w: Tensor,
    /// `[WIDTH]`
    pub bias: Tensor,
}

impl Model {
    /// Weights drawn from `seed`.
    pub fn new(seed: u64) -> Model {
        Model {
            w: Tensor::randn(&[WIDTH, WIDTH], seed).mul(0.25).unwrap().with_name("w"),
            bias: Tensor::randn(&[WIDTH], seed + 1).with_name("bias"),
        }
    }
}

/// An input of `rows` rows.
pub fn example_input(rows: usize, seed: u64) -> Tensor {
    Tensor::randn(&[rows, WIDTH], seed)
}

// ANCHOR: gated_original
/// A data-dependent branch: which activation runs depends on the sign of the layer's total.
pub fn gated_original(m: &Model, x: &Tensor) -> Result<Tensor> {
    let h = x.linear(&m.w, Some(&m.bias))?;
    if h.sum_all()?.item()? > 0.0 { h.relu() } else { h.neg()?.sigmoid() }
}
// ANCHOR_END: gated_original

/// Collects log lines, and prints them as it goes (a side effect on the host).
#[derive(Debug, Default)]
pub struct Logger {
    lines: Mutex<Vec<String>>,
}

impl Logger {
    /// An empty log.
    pub fn new() -> Logger {
        Logger::default()
    }

    /// Prints `line` and keeps it. Inside a compiled function this is a graph break, like
    /// Python's `print`.
    #[track_caller]
    pub fn log(&self, line: String) -> Result<()> {
        engine::println!("[log] {line}")?;
        self.lines.lock().expect("log lock").push(line);
        Ok(())
    }

    /// Every line logged so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("log lock").clone()
    }
}

// ANCHOR: normalized_original
/// A logging side effect between the ops.
pub fn normalized_original(x: &Tensor, logger: &Logger) -> Result<Tensor> {
    let h = x.tanh()?;
    logger.log(format!("tanh done, shape {:?}", h.shape()))?;
    let out = h.softmax(-1)?;
    logger.log("softmax done".to_string())?;
    Ok(out)
}
// ANCHOR_END: normalized_original

// ANCHOR: standardized_original
/// A round trip through host memory: statistics computed in Rust from the tensor's values.
pub fn standardized_original(x: &Tensor) -> Result<Tensor> {
    let h = x.mul(2.0)?.add(1.0)?;
    let values = h.to_vec()?;
    let n = values.len() as f32;
    let mean = values.iter().sum::<f32>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    h.sub(mean)?.div((var + 1e-5).sqrt())
}
// ANCHOR_END: standardized_original

// ANCHOR: log_clip
/// Keeps values in `[-1, 1]`, and grows only logarithmically beyond: `sign(v) * (1 + ln |v|)`.
pub fn log_clip(v: f32) -> f32 {
    if v.abs() <= 1.0 { v } else { v.signum() * (1.0 + v.abs().ln()) }
}
// ANCHOR_END: log_clip

// ANCHOR: clipped_original
/// An opaque host function: a Rust function applied to every element.
pub fn clipped_original(x: &Tensor) -> Result<Tensor> {
    let h = x.mul(3.0)?;
    let clipped = h.map_host("log_clip", log_clip)?;
    clipped.add(x)
}
// ANCHOR_END: clipped_original

// ANCHOR: layered
/// `layers` pointwise layers with `breaks` explicit graph breaks spread evenly between them: the
/// same arithmetic whatever `breaks` is, split into `breaks + 1` graphs. There is room for a break
/// after every layer but the last, so `breaks` above `layers - 1` counts as `layers - 1`.
pub fn layered(x: &Tensor, layers: usize, breaks: usize) -> Result<Tensor> {
    let pieces = breaks.min(layers.saturating_sub(1)) + 1;
    let mut h = x.clone();
    for layer in 1..=layers {
        h = h.mul(1.01)?.add(0.1)?.tanh()?;
        // A break goes where `layer * pieces / layers`, rounded down, steps up: evenly spread.
        if layer < layers && layer * pieces / layers > (layer - 1) * pieces / layers {
            engine::dynamo::graph_break()?;
        }
    }
    Ok(h)
}
// ANCHOR_END: layered

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layered_makes_one_graph_more_than_its_breaks() -> Result<()> {
        let x = Tensor::randn(&[2], 0);
        for layers in 1..=9 {
            for breaks in 0..=layers + 1 {
                let report = engine::dynamo::explain(|x: Tensor| layered(&x, layers, breaks)).call(&x)?;
                let expected = breaks.min(layers - 1) + 1;
                assert_eq!(report.graph_count(), expected, "layered(x, {layers}, {breaks})");
            }
        }
        Ok(())
    }
}
