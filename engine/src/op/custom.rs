//! Custom ops with their own kernel source, the analogue of `torch.library.custom_op` and
//! `torch.library.triton_op`: a function the tracer cannot see into becomes one graph node
//! instead of a graph break, because the engine is given a kernel it can compile and run.
//!
//! A custom op here is *elementwise*: its source defines one C function that computes one output
//! element from one element of each input, and the inputs broadcast together like any pointwise
//! op. That shape keeps every part of the pipeline simple and honest:
//!
//! - eagerly (and in the `eager`/`aot_eager` backends) the engine wraps the function in a loop,
//!   compiles it with the system C compiler (CUDA C with NVRTC on a GPU) and runs it;
//! - in a graph it is the node `Op::Custom`, classed as pointwise, so Inductor may paste the
//!   function into a fused kernel or launch it on its own;
//! - AOT leaves it alone: it has no decomposition.
//!
//! ```no_run
//! use engine::{op::CustomOp, Tensor};
//! let soft_clip = CustomOp::elementwise("mylib::soft_clip", 1)
//!     .c_source("float soft_clip(float x) { return x / (1.0f + fabsf(x)); }")
//!     .register()?;
//! let y = soft_clip.call(&[&Tensor::randn(&[4], 0)])?;
//! # Ok::<(), engine::Error>(())
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use crate::codecache::{CCompiler, SharedLibrary};
use crate::error::{Error, Result, SourceLocation};

/// The most inputs a custom op may take.
pub const MAX_CUSTOM_OP_INPUTS: usize = 4;

/// A registered elementwise op with its kernel source. Cheap to clone; two handles are equal when
/// they have the same name, arity and sources.
#[derive(Clone)]
pub struct CustomOp(Arc<Definition>);

struct Definition {
    name: &'static str,
    function: String,
    arity: usize,
    c_source: String,
    cuda_source: Option<String>,
    cpu: CpuKernel,
}

/// The compiled C loop and the library that keeps its code loaded.
struct CpuKernel {
    function: unsafe extern "C" fn(*const *const f32, *mut f32, i64),
    _library: SharedLibrary,
}

/// Collects a custom op's sources before [`CustomOpBuilder::register`] compiles them.
#[derive(Clone, Debug)]
pub struct CustomOpBuilder {
    name: String,
    arity: usize,
    c_source: Option<String>,
    cuda_source: Option<String>,
    location: SourceLocation,
}

impl CustomOp {
    /// Starts defining an elementwise op called `name` (`namespace::function`, like
    /// `mylib::soft_clip`) that takes `arity` tensors. The C source must define
    /// `float function(float, ...)` with `arity` parameters.
    #[track_caller]
    pub fn elementwise(name: &str, arity: usize) -> CustomOpBuilder {
        CustomOpBuilder {
            name: name.to_string(),
            arity,
            c_source: None,
            cuda_source: None,
            location: SourceLocation::caller(),
        }
    }

    /// The full name, `namespace::function`.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// The C function the sources define (the part of the name after `::`).
    pub fn function(&self) -> &str {
        &self.0.function
    }

    /// How many tensor inputs it takes.
    pub fn arity(&self) -> usize {
        self.0.arity
    }

    /// C source defining `float function(float, ...)`: one output element from one element of
    /// each input. Generated CPU code may include it verbatim.
    pub fn c_source(&self) -> &str {
        &self.0.c_source
    }

    /// CUDA C source defining `__device__ float function(float, ...)`, when one was given.
    pub fn cuda_source(&self) -> Option<&str> {
        self.0.cuda_source.as_deref()
    }

    /// Runs the compiled C loop over dense inputs that already have the output's shape.
    pub(crate) fn run_cpu(&self, inputs: &[Vec<f32>], numel: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; numel];
        let pointers: Vec<*const f32> = inputs.iter().map(|v| v.as_ptr()).collect();
        // SAFETY: the loop reads `numel` elements from each of `arity` input buffers (each has
        // `numel`: they were expanded to the output shape) and writes `numel` to `out`.
        unsafe { (self.0.cpu.function)(pointers.as_ptr(), out.as_mut_ptr(), numel as i64) };
        out
    }
}

impl CustomOpBuilder {
    /// The C source of the element function.
    pub fn c_source(mut self, source: &str) -> Self {
        self.c_source = Some(source.to_string());
        self
    }

    /// The CUDA C source of the element function (a `__device__ float function(...)`), used on
    /// GPUs.
    pub fn cuda_source(mut self, source: &str) -> Self {
        self.cuda_source = Some(source.to_string());
        self
    }

    /// Checks the definition and compiles the C kernel now, so that a mistake in the source is
    /// reported here, with the compiler's message, rather than in the middle of a model.
    pub fn register(self) -> Result<CustomOp> {
        let invalid = |message: String| Error::InvalidArgument { op: "custom_op", message, location: self.location };
        let function = match self.name.split_once("::") {
            Some((namespace, function)) if is_identifier(namespace) && is_identifier(function) => function.to_string(),
            _ => {
                return Err(invalid(format!("name `{}` must be `namespace::function`, both C identifiers", self.name)));
            }
        };
        if !(1..=MAX_CUSTOM_OP_INPUTS).contains(&self.arity) {
            return Err(invalid(format!("takes 1 to {MAX_CUSTOM_OP_INPUTS} inputs, not {}", self.arity)));
        }
        let Some(c_source) = self.c_source else {
            return Err(invalid(format!("`{}` needs a C source defining `float {function}(...)`", self.name)));
        };
        if !c_source.contains(&function) {
            return Err(invalid(format!("the C source of `{}` does not define `{function}`", self.name)));
        }
        // A compile error names the learner's line that registered the op, not only the C file.
        let cpu = compile_cpu_kernel(&function, self.arity, &c_source).map_err(|error| match error {
            Error::Compile { tool, message } => Error::Compile {
                tool,
                message: format!("{message}\n(the C source of `{}`, registered at {})", self.name, self.location),
            },
            other => other,
        })?;
        Ok(CustomOp(Arc::new(Definition {
            name: intern(self.name),
            function,
            arity: self.arity,
            c_source,
            cuda_source: self.cuda_source,
            cpu,
        })))
    }
}

/// The name as a `&'static str` (what [`Op::name`](super::Op::name) returns), leaked once per
/// distinct name rather than once per registration: re-registering an op in a loop (a test, a
/// notebook-style rerun) does not grow memory.
fn intern(name: String) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The C translation unit for the eager CPU kernel: the learner's function and a loop over it.
fn cpu_kernel_source(function: &str, arity: usize, c_source: &str, openmp: bool) -> String {
    let args: Vec<String> = (0..arity).map(|i| format!("in[{i}][i]")).collect();
    let pragma = if openmp { "    #pragma omp parallel for if (n > 32768)\n" } else { "" };
    format!(
        "#include <math.h>\n\n{c_source}\n\n\
         void engine_custom_kernel(const float *const *in, float *out, long n) {{\n\
         {pragma}    for (long i = 0; i < n; i++) out[i] = {function}({});\n}}\n",
        args.join(", ")
    )
}

fn compile_cpu_kernel(function: &str, arity: usize, c_source: &str) -> Result<CpuKernel> {
    let compiler = CCompiler::detect()?;
    let library = compiler.compile(&cpu_kernel_source(function, arity, c_source, compiler.openmp()))?;
    // SAFETY: the wrapper above defines exactly this signature.
    let symbol =
        unsafe { library.get::<unsafe extern "C" fn(*const *const f32, *mut f32, i64)>("engine_custom_kernel") }?;
    let function = *symbol;
    Ok(CpuKernel { function, _library: library })
}

impl PartialEq for CustomOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.name == other.0.name
                && self.0.arity == other.0.arity
                && self.0.c_source == other.0.c_source
                && self.0.cuda_source == other.0.cuda_source)
    }
}

impl Eq for CustomOp {}

impl Hash for CustomOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
        self.0.arity.hash(state);
    }
}

impl fmt::Debug for CustomOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CustomOp({}, {} inputs)", self.0.name, self.0.arity)
    }
}
