//! The example of phase 5's modes page (`book/src/phase5/modes.md`): the book's MLP compiled in
//! each mode, with what each mode decided, on whatever device the book is built on (the CPU).

use engine::dynamo::{self, Mode};
use engine::logs::{self, Artifact};
use engine::{Result, Tensor};

use crate::mlp::Mlp;

/// The MLP in every mode: the same answer each time, and the modes' logs.
pub fn modes() -> Result<()> {
    // ANCHOR: modes
    let mlp = Mlp::new(0);
    let x = Tensor::randn(&[2, 4], 100);
    let eager = mlp.forward(&x)?.to_vec()?;
    for mode in Mode::ALL {
        let model = dynamo::compile(|x: Tensor| mlp.forward(&x)).mode(mode);
        // What ENGINE_LOGS=cudagraphs,autotuning would print, collected instead.
        let (y, log) = logs::capture(&[Artifact::Cudagraphs, Artifact::Autotuning], || {
            // Warm-up, recording (on a GPU), replay.
            model.call(&x)?;
            model.call(&x)?;
            model.call(&x)
        });
        let same = y?.to_vec()?.iter().zip(&eager).all(|(a, b)| (a - b).abs() < 1e-5);
        println!("{mode}: same as eager: {same}");
        print!("{log}");
    }
    // ANCHOR_END: modes
    Ok(())
}
