//! Phase 3, graph breaks: a model with a data-dependent branch and a print, what capture makes
//! of it, and the same model with its breaks removed.

use engine::dynamo::{self, CustomOp};
use engine::logs::{self, Artifact};
use engine::{Result, Tensor};

// ANCHOR: head
/// A branch on a tensor's value, then a print of a tensor: two graph breaks.
pub fn head(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let h = x.matmul(w)?.tanh()?;
    let h = if h.sum_all()?.item()? > 0.0 { h.mul(2.0)? } else { h.neg()? };
    engine::println!("row means: {}", h.mean(1, false)?)?;
    h.softmax(-1)
}
// ANCHOR_END: head

/// The weights `head` is called with in this chapter.
pub fn weights() -> Tensor {
    Tensor::randn(&[4, 6], 1).with_name("w")
}

/// `explain` on `head`: three graphs, two breaks, each with its line.
pub fn explain() -> Result<()> {
    // ANCHOR: explain
    let w = weights();
    let report = dynamo::explain(|x: Tensor| head(&x, &w)).call(&Tensor::randn(&[3, 4], 2))?;
    println!("{report}");
    // ANCHOR_END: explain
    Ok(())
}

/// The same under `fullgraph(true)`: the first break is an error.
pub fn fullgraph() -> Result<()> {
    // ANCHOR: fullgraph
    let w = weights();
    let strict = dynamo::compile(|x: Tensor| head(&x, &w)).fullgraph(true);
    match strict.call(&Tensor::randn(&[3, 4], 2)) {
        Ok(_) => println!("compiled into one graph"),
        Err(e) => println!("error: {e}"),
    }
    // ANCHOR_END: fullgraph
    Ok(())
}

/// The `graph_breaks` log, as `ENGINE_LOGS=graph_breaks` prints it.
pub fn break_log() -> Result<()> {
    // ANCHOR: break_log
    let w = weights();
    let compiled = dynamo::compile(|x: Tensor| head(&x, &w)).name("head");
    let (result, log) = logs::capture(&[Artifact::GraphBreaks], || compiled.call(&Tensor::randn(&[3, 4], 2)));
    result?;
    print!("{log}");
    // ANCHOR_END: break_log
    Ok(())
}

// ANCHOR: head_fixed
/// `head` without breaks: the branch as a `cond`, the print only when running eagerly.
fn head_fixed(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let h = x.matmul(w)?.tanh()?;
    let positive = h.sum_all()?.gt(0.0)?;
    let h = dynamo::cond(&positive, |hs| hs[0].mul(2.0), |hs| hs[0].neg(), &[&h])?;
    if !dynamo::is_compiling() {
        engine::println!("row means: {}", h.mean(1, false)?)?;
    }
    h.softmax(-1)
}
// ANCHOR_END: head_fixed

/// `explain` on the fixed head: one graph holding both branches.
pub fn fixed() -> Result<()> {
    let w = weights();
    let x = Tensor::randn(&[3, 4], 2);
    // ANCHOR: fixed
    let report = dynamo::explain(|x: Tensor| head_fixed(&x, &w)).call(&x)?;
    println!("{} graph, {} breaks", report.graph_count(), report.graph_break_count());
    print!("{}", report.graphs[0]);
    let (fixed, original) = (report.outputs[0].to_vec()?, head(&x, &w)?.to_vec()?);
    // Compiled code may sum a softmax row in vector lanes: equal up to float rounding.
    let same = fixed.iter().zip(&original).all(|(a, b)| (a - b).abs() <= 1e-6);
    println!("same outputs as `head` (to 1e-6): {same}");
    // ANCHOR_END: fixed
    Ok(())
}

/// A host function registered as a custom op with a C kernel: a node, not a break.
pub fn custom_op() -> Result<()> {
    // ANCHOR: custom_op
    let soft_sign = CustomOp::elementwise("demo::soft_sign", 1)
        .c_source("float soft_sign(float x) { return x / (1.0f + fabsf(x)); }")
        .cuda_source("__device__ float soft_sign(float x) { return x / (1.0f + fabsf(x)); }")
        .register()?;
    let report =
        dynamo::explain(|x: Tensor| soft_sign.call(&[&x.mul(3.0)?])?.add(&x)).call(&Tensor::randn(&[2, 3], 0))?;
    print!("{}", report.graphs[0]);
    // ANCHOR_END: custom_op
    Ok(())
}

/// Host arithmetic whose result enters the next graph as a constant: a recompile on every call.
pub fn constant_recompiles() -> Result<()> {
    // ANCHOR: constant_recompiles
    let compiled = dynamo::compile(|x: Tensor| workbook_models::phase3::standardized_original(&x)).name("standardized");
    let ((), log) = logs::capture(&[Artifact::Recompiles], || {
        for seed in 0..3 {
            compiled.call(&Tensor::randn(&[2, 4], seed)).unwrap();
        }
    });
    print!("{log}");
    // ANCHOR_END: constant_recompiles
    Ok(())
}

/// Regional compilation: a stack of blocks compiled whole against one block compiled once for
/// all of them, over three sequence lengths.
pub fn regional() -> Result<()> {
    use engine::Device;
    use workbook_models::phase5::{Block, BlockShape, Stack};
    // ANCHOR: regional
    let shape = BlockShape { batch: 2, seq: 8, d_model: 32, heads: 4 };
    let stack = Stack::new(shape, 4, 0, Device::Cpu)?;
    let whole = dynamo::compile(|x: Tensor| stack.naive_forward(&x)).name("the whole stack");
    let region = dynamo::compile_region(|block: &Block, x: Tensor| block.naive_forward(&x)).name("one block");
    for seq in [8, 12, 16] {
        let x = Tensor::randn(&[2, seq, 32], seq as u64);
        let expected = whole.call(&x)?;
        let mut h = x;
        for block in &stack.blocks {
            h = region.call(block, &h)?;
        }
        let same = h.to_vec()?.iter().zip(expected.to_vec()?).all(|(a, b)| (a - b).abs() < 1e-4);
        let (w, r) = (whole.stats(), region.stats());
        println!(
            "length {seq}: same output {same}; whole stack: {} compiles, graph of {} ops",
            w.compiles,
            ops(&stack, stack.blocks.len())?
        );
        println!(
            "           region: {} compiles, {} cache hits, graph of {} ops",
            r.compiles,
            r.cache_hits,
            ops(&stack, 1)?
        );
    }
    // ANCHOR_END: regional
    Ok(())
}

/// Ops in the graph of the stack's first `blocks` blocks.
fn ops(stack: &workbook_models::phase5::Stack, blocks: usize) -> Result<usize> {
    let first = workbook_models::phase5::Stack { blocks: stack.blocks.iter().take(blocks).cloned().collect() };
    let x = Tensor::randn(&[2, 8, 32], 0);
    Ok(dynamo::explain(|x: Tensor| first.naive_forward(&x)).call(&x)?.graphs[0].op_count())
}

/// What the compile trace holds: every record of a function that breaks once and recompiles once,
/// by compile.
pub fn compile_trace() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("book-compile-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // ANCHOR: compile_trace
    engine::trace_structured::trace_to(Some(&dir)); // what ENGINE_TRACE=DIR does
    let w = weights();
    let compiled = dynamo::compile(|x: Tensor| head(&x, &w)).name("head");
    for rows in [3, 5] {
        compiled.call(&Tensor::randn(&[rows, 4], 2))?;
    }
    engine::trace_structured::trace_to(None);
    // ANCHOR_END: compile_trace
    for entry in std::fs::read_dir(&dir).map_err(|e| engine::Error::Io { path: dir.clone(), message: e.to_string() })? {
        let path = entry.map_err(|e| engine::Error::Io { path: dir.clone(), message: e.to_string() })?.path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| engine::Error::Io { path: path.clone(), message: e.to_string() })?;
        let mut by_compile: Vec<(String, Vec<String>)> = Vec::new();
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| engine::Error::Io { path: path.clone(), message: e.to_string() })?;
            let id = &record["compile_id"];
            let id = format!("[{}/{}/{}]", id["function"], id["resume"], id["attempt"]);
            let kind = match record["name"].as_str() {
                Some(name) => format!("{} {name}", record["kind"].as_str().unwrap_or("?")),
                None => record["kind"].as_str().unwrap_or("?").to_string(),
            };
            match by_compile.iter_mut().find(|(i, _)| *i == id) {
                Some((_, kinds)) => kinds.push(kind),
                None => by_compile.push((id, vec![kind])),
            }
        }
        for (id, kinds) in by_compile {
            println!("{id} {}", kinds.join(", "));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
