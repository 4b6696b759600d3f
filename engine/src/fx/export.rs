//! Exported programs, the analogue of `torch.export`: a whole function traced into one graph (a
//! graph break is an error, as with `fullgraph=True`), saved with the tensors it captured as one
//! versioned JSON text, and loaded back by a loader that trusts nothing in the text.
//!
//! PyTorch's `ExportedProgram` pairs an FX graph with an *input spec* saying which placeholders
//! are the caller's inputs and which are parameters or constant tensors, and serializes both
//! (`torch.export.save`). The same split here: each placeholder is a [`ProgramInput::User`]
//! (handed in at every call) or a [`ProgramInput::Constant`] (a tensor the traced code captured,
//! a model's weight or something derived from it, saved with the program).
//!
//! The loader ([`ExportedProgram::from_json`]) rebuilds the graph through [`Graph::add_call`],
//! so every op's arity, operand kinds, parameters and shape rule are checked again, and a shape
//! written in the file must be the one the rule infers. Only the engine's own ops load: a custom
//! op would be kernel code the loader runs unseen, and `cond` holds graphs of its own that this
//! format does not carry. Shapes are static and every placeholder is dense (row-major), which is
//! how the loaded program is fed. Every tensor is `f32`: the format names no dtype, and a program
//! with a tensor of another dtype is refused at export; a dtype field will come with a new
//! [`FORMAT_VERSION`].
//!
//! ```
//! use engine::{Device, Tensor, fx::export::{ExportedProgram, export}};
//! let w = Tensor::randn(&[4, 3], 0).with_name("w");
//! let program = export(|x| Ok(vec![x[0].linear(&w, None)?.relu()?]), &[Tensor::randn(&[2, 3], 1)])?;
//! let loaded = ExportedProgram::from_json(&program.to_json()?, Device::Cpu)?;
//! let x = Tensor::randn(&[2, 3], 2);
//! assert_eq!(loaded.run(&[x.clone()])?[0].to_vec()?, program.run(&[x])?[0].to_vec()?);
//! # Ok::<(), engine::Error>(())
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::graph::{Arg, Graph, NodeId, NodeKind};
use super::interpreter::run_graph;
use super::proxy::{InputOrigin, Traced, Tracer};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result, SourceLocation};
use crate::layout::{contiguous_strides, numel};
use crate::op::{AttentionMask, BinaryOp, Op, ReduceOp, UnaryOp};
use crate::scalar::Scalar;
use crate::tensor::{Tensor, TensorMeta};

/// What the `format` field of every exported program says.
pub const FORMAT: &str = "engine.exported_program";

/// The format's version: a loader refuses any other, so a change of meaning never loads silently.
pub const FORMAT_VERSION: u32 = 1;

/// Where a placeholder's value comes from (torch.export's `InputSpec`).
#[derive(Clone, Debug)]
pub enum ProgramInput {
    /// Handed in by the caller at every call, in order.
    User,
    /// Saved with the program: a tensor the traced code captured.
    Constant(Tensor),
}

/// A graph with the source of each of its placeholders' values: what [`export`] makes and
/// [`ExportedProgram::from_json`] loads.
#[derive(Clone, Debug)]
pub struct ExportedProgram {
    graph: Graph,
    inputs: Vec<ProgramInput>,
}

/// Traces `f` on `args` into one graph, with no graph break allowed (as `torch.export` and
/// `fullgraph=True` require): a break is an error naming its reason and line. Tensors `f`
/// captures become [`ProgramInput::Constant`]s holding their values at export time.
#[track_caller]
pub fn export(f: impl FnOnce(Vec<Tensor>) -> Result<Vec<Tensor>>, args: &[Tensor]) -> Result<ExportedProgram> {
    let tracer = Tracer::new();
    let symbolic = args.iter().map(|a| tracer.input(a)).collect::<Result<Vec<_>>>()?;
    let outputs = f(symbolic)?;
    ExportedProgram::from_traced(tracer.finish(&outputs)?)
}

impl ExportedProgram {
    /// The program a finished trace describes: the function's arguments are its user inputs and
    /// the tensors it captured its constants.
    #[track_caller]
    pub fn from_traced(traced: Traced) -> Result<ExportedProgram> {
        let inputs = traced
            .inputs
            .into_iter()
            .zip(&traced.origins)
            .map(|(tensor, origin)| match (origin, tensor) {
                (InputOrigin::Captured, Some(tensor)) => ProgramInput::Constant(tensor),
                _ => ProgramInput::User,
            })
            .collect();
        ExportedProgram::new(traced.graph, inputs)
    }

    /// A program from a graph and one [`ProgramInput`] per placeholder, checked: shapes static,
    /// every constant of its placeholder's shape, and only ops this format can hold.
    #[track_caller]
    pub fn new(graph: Graph, inputs: Vec<ProgramInput>) -> Result<ExportedProgram> {
        let invalid = invalid_here(SourceLocation::caller());
        if inputs.len() != graph.placeholders().len() {
            return Err(invalid(format!(
                "{} input specs for {} placeholders",
                inputs.len(),
                graph.placeholders().len()
            )));
        }
        if graph.is_dynamic() {
            return Err(invalid("the graph has dynamic sizes; an exported program has static shapes".into()));
        }
        for (&id, input) in graph.placeholders().iter().zip(&inputs) {
            let node = graph.node(id);
            if let ProgramInput::Constant(tensor) = input
                && tensor.shape() != node.meta.shape.as_slice()
            {
                return Err(invalid(format!(
                    "constant `{}` has shape {:?}, its placeholder {:?}",
                    node.name,
                    tensor.shape(),
                    node.meta.shape
                )));
            }
        }
        for node in graph.nodes() {
            if let Some(op) = node.op() {
                written_as(op).map_err(|why| invalid(format!("node `{}`: {why}", node.name)))?;
            }
            if node.meta.dtype != DType::F32 {
                return Err(invalid(format!(
                    "node `{}` is {}; format version {FORMAT_VERSION} holds float32 programs only (export the \
                     float32 model and convert after loading)",
                    node.name, node.meta.dtype
                )));
            }
        }
        Ok(ExportedProgram { graph, inputs })
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Where each placeholder's value comes from, in placeholder order.
    pub fn inputs(&self) -> &[ProgramInput] {
        &self.inputs
    }

    /// How many tensors a call takes.
    pub fn user_input_count(&self) -> usize {
        self.inputs.iter().filter(|i| matches!(i, ProgramInput::User)).count()
    }

    /// One tensor per placeholder: the `user` tensors in order where the program takes the
    /// caller's, its constants elsewhere. What a compiled form of [`Self::graph`] is run on.
    #[track_caller]
    pub fn placeholder_values(&self, user: &[Tensor]) -> Result<Vec<Tensor>> {
        if user.len() != self.user_input_count() {
            return Err(invalid_here(SourceLocation::caller())(format!(
                "the program takes {} inputs, got {}",
                self.user_input_count(),
                user.len()
            )));
        }
        let mut user = user.iter();
        Ok(self
            .inputs
            .iter()
            .map(|input| match input {
                ProgramInput::User => user.next().expect("counted above").clone(),
                ProgramInput::Constant(tensor) => tensor.clone(),
            })
            .collect())
    }

    /// Runs the program on `user` inputs through the [interpreter](super::Interpreter).
    #[track_caller]
    pub fn run(&self, user: &[Tensor]) -> Result<Vec<Tensor>> {
        let here = SourceLocation::caller();
        run_graph(&self.graph, &self.placeholder_values(user)?, here)
    }

    /// The program as JSON text: the nodes in order (placeholders with their shapes, constants
    /// with their values as base64 little-endian `f32`, op calls with their target, parameters,
    /// arguments and output shape) and the outputs. Reads every constant's values (from the GPU
    /// when it is there).
    pub fn to_json(&self) -> Result<String> {
        let mut inputs = self.inputs.iter();
        let mut nodes = Vec::with_capacity(self.graph.nodes().len());
        for node in self.graph.nodes() {
            let (name, shape) = (node.name.clone(), node.meta.shape.clone());
            nodes.push(match &node.kind {
                NodeKind::Placeholder { .. } => match inputs.next().expect("one input per placeholder") {
                    ProgramInput::User => NodeSpec::Input { name, shape },
                    ProgramInput::Constant(tensor) => {
                        let bytes: Vec<u8> = tensor.to_vec()?.iter().flat_map(|v| v.to_le_bytes()).collect();
                        NodeSpec::Constant { name, shape, data: BASE64.encode(bytes) }
                    }
                },
                NodeKind::Call { op, args } => {
                    let (target, params) = written_as(op).expect("checked by ExportedProgram::new");
                    let args = args.iter().map(|a| ArgSpec::of(a, &self.graph)).collect();
                    NodeSpec::Call { name, target: target.to_string(), params, args, shape }
                }
            });
        }
        let outputs = self.graph.outputs().iter().map(|&o| self.graph.node(o).name.clone()).collect();
        let file = ProgramFile { format: FORMAT.into(), version: FORMAT_VERSION, nodes, outputs };
        serde_json::to_string(&file).map_err(|e| invalid_here(SourceLocation::caller())(e.to_string()))
    }

    /// Loads a program written by [`Self::to_json`], with its placeholders and constants on
    /// `device`. Everything is checked, and anything wrong is an [`Error::Export`] naming the node:
    /// the format and version, unknown or missing fields, names used twice or before they are
    /// defined, unknown ops and custom ops, parameters, operand kinds and shapes (each call's shape
    /// is inferred again and must equal the one written), constants whose data does not fill
    /// their shape.
    #[track_caller]
    pub fn from_json(text: &str, device: Device) -> Result<ExportedProgram> {
        let here = SourceLocation::caller();
        let invalid = invalid_here(here);
        let file: ProgramFile = serde_json::from_str(text).map_err(|e| invalid(format!("not readable: {e}")))?;
        if file.format != FORMAT || file.version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format `{}` version {}; this engine reads `{FORMAT}` version {FORMAT_VERSION}",
                file.format, file.version
            )));
        }
        let mut graph = Graph::new();
        let mut inputs = Vec::new();
        let mut ids: FxHashMap<String, NodeId> = FxHashMap::default();
        for spec in file.nodes {
            let name = spec.name().to_string();
            let at_node = |why: String| invalid(format!("node `{name}`: {why}"));
            if ids.contains_key(&name) {
                return Err(at_node("the name is used twice".into()));
            }
            let id = match spec {
                NodeSpec::Input { shape, .. } => {
                    inputs.push(ProgramInput::User);
                    graph.add_placeholder(&name, meta(&shape, device), contiguous_strides(&shape))
                }
                NodeSpec::Constant { shape, data, .. } => {
                    let tensor = decode(&data, &shape).map_err(at_node)?.with_name(&name).to(device)?;
                    inputs.push(ProgramInput::Constant(tensor));
                    graph.add_placeholder(&name, meta(&shape, device), contiguous_strides(&shape))
                }
                NodeSpec::Call { target, params, args, shape, .. } => {
                    let op = op_of(&target, params).map_err(at_node)?;
                    let args =
                        args.into_iter().map(|a| a.resolve(&ids)).collect::<Result<Vec<_>, _>>().map_err(at_node)?;
                    let id = graph.add_call(op, args, here).map_err(|e| at_node(e.to_string()))?;
                    let inferred = &graph.node(id).meta.shape;
                    if *inferred != shape {
                        return Err(at_node(format!("written with shape {shape:?}, but its op gives {inferred:?}")));
                    }
                    id
                }
            };
            ids.insert(name, id);
        }
        let outputs = file
            .outputs
            .iter()
            .map(|name| ids.get(name).copied().ok_or_else(|| invalid(format!("output `{name}` is no node"))))
            .collect::<Result<Vec<_>>>()?;
        if outputs.is_empty() {
            return Err(invalid("the program returns nothing".into()));
        }
        graph.set_outputs(outputs)?;
        ExportedProgram::new(graph, inputs)
    }
}

/// An [`Error::Export`] at `location` with a message.
fn invalid_here(location: SourceLocation) -> impl Fn(String) -> Error {
    move |message| Error::Export { message, location }
}

fn meta(shape: &[usize], device: Device) -> TensorMeta {
    TensorMeta { shape: shape.to_vec(), dtype: DType::F32, device }
}

/// A constant's values from base64 little-endian `f32`, which must fill `shape` exactly.
fn decode(data: &str, shape: &[usize]) -> Result<Tensor, String> {
    let bytes = BASE64.decode(data).map_err(|e| format!("its data is not base64: {e}"))?;
    if bytes.len() != 4 * numel(shape) {
        return Err(format!("its data holds {} bytes, shape {shape:?} needs {}", bytes.len(), 4 * numel(shape)));
    }
    let values = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Tensor::from_vec(values, shape).map_err(|e| e.to_string())
}

/// The file: a format name and version, the nodes in order, the names of the outputs.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramFile {
    format: String,
    version: u32,
    nodes: Vec<NodeSpec>,
    outputs: Vec<String>,
}

/// One node as written.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum NodeSpec {
    /// A [`ProgramInput::User`] placeholder.
    Input { name: String, shape: Vec<usize> },
    /// A [`ProgramInput::Constant`] placeholder and its values.
    Constant { name: String, shape: Vec<usize>, data: String },
    /// An op call: the op's name, its parameters, its operands and the shape it produces.
    Call {
        name: String,
        target: String,
        #[serde(default, skip_serializing_if = "Params::is_empty")]
        params: Params,
        args: Vec<ArgSpec>,
        shape: Vec<usize>,
    },
}

impl NodeSpec {
    fn name(&self) -> &str {
        match self {
            NodeSpec::Input { name, .. } | NodeSpec::Constant { name, .. } | NodeSpec::Call { name, .. } => name,
        }
    }
}

/// An operand as written: an earlier node by name, or a constant (by its bits when it has no
/// JSON number: NaN and the infinities).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum ArgSpec {
    Node(String),
    Scalar(f32),
    ScalarBits(u32),
}

impl ArgSpec {
    fn of(arg: &Arg, graph: &Graph) -> ArgSpec {
        match arg {
            Arg::Node(id) => ArgSpec::Node(graph.node(*id).name.clone()),
            Arg::Scalar(Scalar(v)) if v.is_finite() => ArgSpec::Scalar(*v),
            Arg::Scalar(Scalar(v)) => ArgSpec::ScalarBits(v.to_bits()),
        }
    }

    fn resolve(self, ids: &FxHashMap<String, NodeId>) -> Result<Arg, String> {
        Ok(match self {
            ArgSpec::Node(name) => {
                Arg::Node(*ids.get(&name).ok_or_else(|| format!("reads `{name}`, which is not an earlier node"))?)
            }
            ArgSpec::Scalar(v) => Arg::Scalar(Scalar(v)),
            ArgSpec::ScalarBits(bits) => Arg::Scalar(Scalar(f32::from_bits(bits))),
        })
    }
}

/// An op's parameters, each written only for the ops that have it.
#[derive(Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    dim: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keepdim: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shape: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dims: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eps: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mask: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    causal: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dtype: Option<DType>,
}

impl Params {
    fn is_empty(&self) -> bool {
        *self == Params::default()
    }
}

/// Serde for an [`Op`] written as this format writes a call's op (its target and parameters), for
/// the other stored forms that hold ops (the FX graph cache's extern steps): one naming of ops on
/// disk, with the same refusals (custom ops, `cond`) and the same checks on reading.
pub(crate) mod op_serde {
    use serde::de::Error as _;
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Params, op_of, written_as};
    use crate::op::Op;

    /// An op as stored: its target and parameters.
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WrittenOp {
        target: String,
        #[serde(default, skip_serializing_if = "Params::is_empty")]
        params: Params,
    }

    /// Writes `op`; an op the format cannot hold is an error.
    pub(crate) fn serialize<S: Serializer>(op: &Op, serializer: S) -> Result<S::Ok, S::Error> {
        let (target, params) = written_as(op).map_err(S::Error::custom)?;
        WrittenOp { target: target.to_string(), params }.serialize(serializer)
    }

    /// Reads an op, checked as [`super::ExportedProgram::from_json`] checks a call's.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Op, D::Error> {
        let written = WrittenOp::deserialize(deserializer)?;
        op_of(&written.target, written.params).map_err(D::Error::custom)
    }
}

/// The target name and parameters `op` is written with, or why the format cannot hold it.
fn written_as(op: &Op) -> Result<(&'static str, Params), String> {
    let none = Params::default();
    let params = match op {
        Op::Custom(custom) => {
            return Err(format!(
                "`{}` is a custom op; an exported program holds only the engine's own ops (a custom op's kernel \
                 is code the loader would run unseen)",
                custom.name()
            ));
        }
        Op::Cond { .. } => {
            return Err("`cond` holds graphs of its own, which an exported program does not carry".into());
        }
        Op::Reduce { dim, keepdim, .. } => Params { dim: Some(*dim), keepdim: Some(*keepdim), ..none },
        Op::Softmax { dim } | Op::LogSoftmax { dim } => Params { dim: Some(*dim), ..none },
        Op::Reshape { shape } | Op::Expand { shape } => Params { shape: Some(shape.clone()), ..none },
        Op::Permute { dims } => Params { dims: Some(dims.clone()), ..none },
        Op::Slice { dim, start, end, step } => {
            Params { dim: Some(*dim), start: Some(*start), end: Some(*end), step: Some(*step), ..none }
        }
        Op::LayerNorm { eps } => Params { eps: Some(eps.0), ..none },
        Op::Cat { dim } => Params { dim: Some(*dim), ..none },
        Op::ScaledDotProductAttention { mask, causal, scale }
        | Op::ScaledDotProductAttentionBackward { mask, causal, scale } => {
            Params { mask: Some(mask.name().to_string()), causal: Some(*causal), scale: Some(scale.0), ..none }
        }
        Op::ToDtype { dtype } | Op::ScaledMm { out_dtype: dtype } => Params { dtype: Some(*dtype), ..none },
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Matmul | Op::Contiguous | Op::Linear | Op::CopyInto => none,
    };
    Ok((op.name(), params))
}

/// The op `target` names, with its parameters, each required where the op has it; the inverse of
/// [`written_as`].
fn op_of(target: &str, params: Params) -> Result<Op, String> {
    let missing = |what: &str| format!("`{target}` needs the parameter `{what}`");
    let dim = || params.dim.ok_or_else(|| missing("dim"));
    let reduce = |kind| -> Result<Op, String> {
        Ok(Op::Reduce { kind, dim: dim()?, keepdim: params.keepdim.ok_or_else(|| missing("keepdim"))? })
    };
    let shape = || params.shape.clone().ok_or_else(|| missing("shape"));
    let op = match target {
        "where" => Op::Where,
        "matmul" => Op::Matmul,
        "contiguous" => Op::Contiguous,
        "copy_" => Op::CopyInto,
        "linear" => Op::Linear,
        "sum" => reduce(ReduceOp::Sum)?,
        "mean" => reduce(ReduceOp::Mean)?,
        "amax" => reduce(ReduceOp::Max)?,
        "softmax" => Op::Softmax { dim: dim()? },
        "log_softmax" => Op::LogSoftmax { dim: dim()? },
        "reshape" => Op::Reshape { shape: shape()? },
        "expand" => Op::Expand { shape: shape()? },
        "permute" => Op::Permute { dims: params.dims.clone().ok_or_else(|| missing("dims"))? },
        "slice" => Op::Slice {
            dim: dim()?,
            start: params.start.ok_or_else(|| missing("start"))?,
            end: params.end.ok_or_else(|| missing("end"))?,
            step: params.step.ok_or_else(|| missing("step"))?,
        },
        "layer_norm" => Op::LayerNorm { eps: Scalar(params.eps.ok_or_else(|| missing("eps"))?) },
        "cat" => Op::Cat { dim: dim()? },
        "to_dtype" => Op::ToDtype { dtype: params.dtype.ok_or_else(|| missing("dtype"))? },
        "scaled_mm" => Op::ScaledMm { out_dtype: params.dtype.ok_or_else(|| missing("dtype"))? },
        "scaled_dot_product_attention" | "scaled_dot_product_attention_backward" => {
            let mask = params.mask.as_deref().ok_or_else(|| missing("mask"))?;
            let mask = [AttentionMask::None, AttentionMask::Boolean, AttentionMask::Additive]
                .into_iter()
                .find(|m| m.name() == mask)
                .ok_or_else(|| format!("`{target}`'s mask is none, boolean or additive, not `{mask}`"))?;
            let causal = params.causal.ok_or_else(|| missing("causal"))?;
            let scale = Scalar(params.scale.ok_or_else(|| missing("scale"))?);
            if target == "scaled_dot_product_attention" {
                Op::ScaledDotProductAttention { mask, causal, scale }
            } else {
                Op::ScaledDotProductAttentionBackward { mask, causal, scale }
            }
        }
        name => {
            if let Some(&u) = UnaryOp::ALL.iter().find(|u| u.name() == name) {
                Op::Unary(u)
            } else if let Some(&b) = BinaryOp::ALL.iter().find(|b| b.name() == name) {
                Op::Binary(b)
            } else {
                return Err(format!(
                    "`{name}` is not an op of the engine's catalogue (custom ops and `cond` are not exported)"
                ));
            }
        }
    };
    // A parameter the op does not have is an error too: the file says something the op ignores.
    let (_, expected) = written_as(&op).expect("a catalogue op");
    if expected != params {
        return Err(format!(
            "`{target}` takes the parameters {}",
            serde_json::to_string(&expected).unwrap_or_default()
        ));
    }
    Ok(op)
}
