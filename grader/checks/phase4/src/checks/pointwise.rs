//! Checks of `pointwise_c` and `pointwise_cuda`: the printed kernels, compiled by the system C
//! compiler or NVRTC inside a real Inductor compilation, compute what eager execution computes,
//! on random programs whose sizes are rarely multiples of the vector width.

use engine::backends::Inductor;
use engine::inductor::{Config, Printers};
use engine::{Device, Tensor};
use grader_harness::{CheckResult, Context, Failure, for_all};

use super::support::{PointwiseProgram, capture, matches_eager};
use crate::subject::{pointwise_c, pointwise_cuda};

/// Inductor with the subject's C printer for pointwise kernels.
fn with_c_printer() -> Inductor {
    Inductor::with_config(Config {
        printers: Printers { pointwise_c: Some(pointwise_c), ..Printers::default() },
        ..Config::default()
    })
}

/// Random pointwise programs compiled with `pointwise_c` match eager.
pub fn pointwise_c_matches_eager(ctx: &Context) -> CheckResult {
    let cases = 24;
    for_all(ctx, cases, PointwiseProgram::strategy(), |program| {
        let inputs = program.inputs(ctx.seed);
        matches_eager("the compiled program's output", with_c_printer(), &|t| program.run(t), &inputs).map(|_| ())
    })?;
    Ok(format!("{cases} random pointwise programs compiled with your C match eager"))
}

/// The CUDA C `pointwise_cuda` prints for a small model, printed without a GPU: a learner who has
/// not started yet reads "not started" here, on any machine.
fn print_sample() -> Result<String, Failure> {
    let model = |t: Vec<Tensor>| t[0].add(&t[1])?.relu()?.mul(2.0);
    let inputs = [Tensor::randn(&[1000], 0), Tensor::randn(&[1000], 1)];
    let config = Config {
        printers: Printers { pointwise_cuda: Some(pointwise_cuda), ..Printers::default() },
        ..Config::default()
    };
    let code = engine::inductor::generate(&capture(&model, &inputs)?, Device::Cuda(0), &config)?;
    Ok(code.kernels.iter().map(|k| k.source.clone()).collect())
}

/// Random pointwise programs compiled with `pointwise_cuda` match eager (on a GPU).
pub fn pointwise_cuda_matches_eager(_: &Context) -> CheckResult {
    print_sample()?;
    Err(Failure::skip("needs a GPU: this engine runs generated CUDA C only where a CUDA device is available"))
}

/// The kernel `pointwise_cuda` prints moves memory at 80% or more of the engine's own (on a GPU).
pub fn pointwise_cuda_bandwidth(_: &Context) -> CheckResult {
    print_sample()?;
    Err(Failure::skip("needs a GPU: this engine runs generated CUDA C only where a CUDA device is available"))
}
