//! Phase 2, graph capture: what `explain` reports about the attention block of the exercises,
//! a dynamic graph, and the recompile log of a batch-size change.

use engine::logs::{self, Artifact};
use engine::{Result, Tensor, dynamo};
use workbook_models::phase2::{Attention, example_input};

/// `explain` on the attention block the exercises use.
pub fn explain() -> Result<()> {
    // ANCHOR: explain
    let model = Attention::new(0);
    let report = dynamo::explain(|x: Tensor| model.forward(&x)).call(&example_input(4, 1))?;
    println!("{report}");
    // ANCHOR_END: explain
    Ok(())
}

/// The same graph as a table, FX's `print_tabular`.
pub fn tabular() -> Result<()> {
    let model = Attention::new(0);
    let report = dynamo::explain(|x: Tensor| model.forward(&x)).call(&example_input(4, 1))?;
    // ANCHOR: tabular
    print!("{}", report.graphs[0].tabular());
    // ANCHOR_END: tabular
    Ok(())
}

/// A size that changes between calls: the recompile that names the failed guard, then a dynamic
/// graph that serves every later size.
pub fn recompiles() -> Result<()> {
    // ANCHOR: recompiles
    let model = Attention::new(0);
    let compiled = dynamo::compile(|x: Tensor| model.forward(&x)).name("attention");
    let ((), log) = logs::capture(&[Artifact::Recompiles, Artifact::Graph], || {
        for tokens in [8, 16, 32, 5] {
            compiled.call(&example_input(tokens, 1)).unwrap();
        }
    });
    print!("{log}");
    let stats = compiled.stats();
    println!(
        "calls {}, compiles {}, recompiles {}, cache hits {}",
        stats.calls, stats.compiles, stats.recompiles, stats.cache_hits
    );
    // ANCHOR_END: recompiles
    Ok(())
}

/// The guards of a dynamic graph, and a size that had to be specialized.
pub fn guards() -> Result<()> {
    // ANCHOR: guards
    let mask = Tensor::ones(&[4, 8]).with_name("mask");
    let f = dynamo::compile(|(x, y): (Tensor, Tensor)| x.matmul(&y.t()?)?.add(&mask)).name("masked").dynamic(true);
    let (result, log) =
        logs::capture(&[Artifact::Guards], || f.call((&Tensor::randn(&[4, 3], 0), &Tensor::randn(&[8, 3], 1))));
    result?;
    print!("{log}");
    // ANCHOR_END: guards
    Ok(())
}
