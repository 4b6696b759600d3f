//! One GPU as the engine uses it, the analogue of `c10::cuda`'s device guard, current stream and
//! cuBLAS handle pool: a context, one stream that every kernel and copy is queued on (so they run
//! in program order with no extra synchronisation), a cuBLAS and a cuBLASLt handle, and the kernel
//! modules loaded so far.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::cublas::CudaBlas;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;

use super::error::CudaError;
use super::lt_handle::LtHandle;
use super::nvrtc::{Cubin, compile_cubin};
use super::pool::BufferPool;
use super::probe::{DeviceFacts, probe};
use super::source::eager_source;
use crate::codecache::cache_key;
use crate::compile_time::{self, Stage};
use crate::device::Device;
use crate::error::{Error, Result};

/// A device set up on first use, or why that failed (kept, so the failure is not retried per op).
type Opened = std::result::Result<Arc<CudaDevice>, CudaError>;

/// A CUDA device ready to run kernels. Get one with [`CudaDevice::get`]; it lives for the process.
pub struct CudaDevice {
    facts: DeviceFacts,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: OnceLock<std::result::Result<Mutex<CudaBlas>, CudaError>>,
    lt: OnceLock<std::result::Result<LtHandle, CudaError>>,
    pool: BufferPool,
    eager: Mutex<HashMap<String, std::result::Result<Arc<Module>, CudaError>>>,
    modules: Mutex<HashMap<String, Arc<Module>>>,
    flush_buffer: Mutex<Option<CudaSlice<f32>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice(cuda:{}, {})", self.facts.ordinal, self.facts.name)
    }
}

impl CudaDevice {
    /// Device `ordinal`, set up on first use. Fails with [`Error::DeviceUnavailable`] naming what is
    /// missing when CUDA cannot run here or the device does not exist.
    pub fn get(ordinal: usize) -> Result<Arc<CudaDevice>> {
        let unavailable = |reason: String| Error::DeviceUnavailable { device: Device::Cuda(ordinal), reason };
        let probe = probe();
        probe.usable().map_err(|reason| unavailable(reason.to_string()))?;
        let count = probe.devices.as_ref().map(Vec::len).unwrap_or(0);
        static DEVICES: OnceLock<Vec<OnceLock<Opened>>> = OnceLock::new();
        let slot = DEVICES
            .get_or_init(|| (0..count).map(|_| OnceLock::new()).collect())
            .get(ordinal)
            .ok_or_else(|| unavailable(format!("this machine has {count} CUDA device(s), numbered from 0")))?;
        slot.get_or_init(|| CudaDevice::open(ordinal).map(Arc::new))
            .clone()
            .map_err(|e| unavailable(format!("setting up the device failed: {e}")))
    }

    fn open(ordinal: usize) -> std::result::Result<CudaDevice, CudaError> {
        let facts = probe().device(ordinal).cloned().ok_or_else(|| CudaError::new("the probe lost the device"))?;
        let context = CudaContext::new(ordinal)?;
        // One stream carries every operation, so cudarc's per-buffer event tracking (made for
        // several streams) would only add two events to each allocation. CUDA graph capture needs
        // it off as well.
        // SAFETY: no buffer exists yet, and all work goes to the single stream created below.
        unsafe { context.disable_event_tracking() };
        // A stream of its own rather than the legacy default stream, which graphs cannot capture.
        let stream = context.new_stream()?;
        keep_freed_memory_pooled(&context)?;
        Ok(CudaDevice {
            facts,
            context,
            stream,
            blas: OnceLock::new(),
            lt: OnceLock::new(),
            pool: BufferPool::default(),
            eager: Mutex::new(HashMap::new()),
            modules: Mutex::new(HashMap::new()),
            flush_buffer: Mutex::new(None),
        })
    }

    /// Facts about the device: name, compute capability, memory, multiprocessors, L2 size.
    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.facts.ordinal
    }

    /// The stream every engine operation on this device is queued on; launch generated kernels
    /// here so that they are ordered with eager ops and copies.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// Waits until every operation queued on the device has finished. Errors from kernels that
    /// failed earlier surface here.
    pub fn synchronize(&self) -> std::result::Result<(), CudaError> {
        self.stream.synchronize().map_err(|e| {
            let mut error = CudaError::from(e);
            error
                .message
                .push_str(" (kernels run asynchronously: set CUDA_LAUNCH_BLOCKING=1 to find the op that failed)");
            error
        })
    }

    /// Compiles `source` with NVRTC for this device's architecture (through the disk cache) and
    /// loads it, once per process: later calls with the same source return the same module.
    pub fn load(&self, source: &str) -> Result<Arc<Module>> {
        let key = cache_key(&[source.as_bytes()]);
        if let Some(module) = lock(&self.modules).get(&key) {
            return Ok(module.clone());
        }
        let module = Arc::new(self.load_uncached(source)?);
        Ok(lock(&self.modules).entry(key).or_insert(module).clone())
    }

    /// Compiles every source of `sources` and of the eager kernel `families` that is not loaded
    /// yet, all at once ([`compile_time::parallel_jobs`]: NVRTC runs in several threads, each
    /// CUBIN through the disk cache), then loads them: what a compiled program runs, made ready
    /// before its first call. Returns the modules of `sources`, in order.
    pub fn load_with_families(&self, sources: &[String], families: &[&str]) -> Result<Vec<Arc<Module>>> {
        let family_sources = families
            .iter()
            .filter(|f| !lock(&self.eager).contains_key(**f))
            .map(|f| eager_source(f).map(|s| (f.to_string(), s)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::Compile {
                tool: "nvrtc".into(),
                message: format!("unknown kernel family in {families:?}"),
            })?;
        let mut all: Vec<&str> = sources.iter().map(String::as_str).collect();
        all.extend(family_sources.iter().map(|(_, s)| s.as_str()));
        let missing: Vec<&str> =
            all.iter().copied().filter(|s| !lock(&self.modules).contains_key(&cache_key(&[s.as_bytes()]))).collect();
        let arch = self.facts.arch();
        let cubins = compile_time::parallel_jobs(missing.clone(), |source| compile_cubin(source, &arch));
        for (source, cubin) in missing.into_iter().zip(cubins) {
            let module = Arc::new(self.load_cubin(cubin?)?);
            lock(&self.modules).entry(cache_key(&[source.as_bytes()])).or_insert(module);
        }
        let modules = all.iter().map(|s| self.load(s)).collect::<Result<Vec<_>>>()?;
        for ((family, _), module) in family_sources.into_iter().zip(&modules[sources.len()..]) {
            lock(&self.eager).entry(family).or_insert_with(|| Ok(module.clone()));
        }
        Ok(modules[..sources.len()].to_vec())
    }

    fn load_uncached(&self, source: &str) -> Result<Module> {
        self.load_cubin(compile_cubin(source, &self.facts.arch())?)
    }

    /// Loads a compiled CUBIN as a module.
    fn load_cubin(&self, Cubin { bytes, path, compiled }: Cubin) -> Result<Module> {
        let what = || format!("cuModuleLoadData {}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        let loaded = compile_time::timed(Stage::Loading, what, || self.context.load_module(Ptx::from_binary(bytes)));
        let module = loaded.map_err(|e| Error::Compile {
            tool: "cuModuleLoadData".into(),
            message: format!("{}: {}", path.display(), CudaError::from(e)),
        })?;
        Ok(Module { module, functions: Mutex::new(HashMap::new()), cubin_path: path, compiled_now: compiled })
    }

    /// The module of eager kernel family `family` (see [`super::eager_families`]), compiled (or
    /// read from the disk cache) and loaded on first use.
    pub fn eager_module(&self, family: &str) -> std::result::Result<Arc<Module>, CudaError> {
        if let Some(loaded) = lock(&self.eager).get(family) {
            return loaded.clone();
        }
        // Compile without holding the lock, so other families can load meanwhile; a race only
        // loads the same module twice, and the first one stored wins.
        let source =
            eager_source(family).ok_or_else(|| CudaError::new(format!("no eager kernel family `{family}`")))?;
        let loaded = self.load(&source).map_err(CudaError::from);
        lock(&self.eager).entry(family.to_string()).or_insert(loaded).clone()
    }

    /// Kernel `name` of eager kernel family `family`.
    pub(crate) fn eager_kernel(&self, family: &str, name: &str) -> std::result::Result<CudaFunction, CudaError> {
        Ok(self.eager_module(family)?.function(name)?)
    }

    /// The eager kernel families loaded so far, in each instance used (`binary_add_bf16`,
    /// `binary_add`; see [`super::eager_families`]), sorted: which kernels a program's eager ops
    /// have launched.
    pub fn loaded_eager_families(&self) -> Vec<String> {
        let mut loaded: Vec<String> =
            lock(&self.eager).iter().filter(|(_, module)| module.is_ok()).map(|(family, _)| family.clone()).collect();
        loaded.sort();
        loaded
    }

    /// The cuBLAS handle, bound to this device's stream; created on first use.
    pub(crate) fn blas(&self) -> std::result::Result<MutexGuard<'_, CudaBlas>, CudaError> {
        let blas = self.blas.get_or_init(|| {
            let created =
                compile_time::timed(Stage::Loading, || "cuBLAS handle".into(), || CudaBlas::new(self.stream.clone()));
            Ok(Mutex::new(created?))
        });
        Ok(lock(blas.as_ref().map_err(Clone::clone)?))
    }

    /// Freed buffers kept for reuse.
    pub(crate) fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// The cuBLASLt handle and workspace (for GEMMs with epilogues); created on first use.
    pub(crate) fn lt(&self) -> std::result::Result<&LtHandle, CudaError> {
        let hopper = self.facts.compute_capability.0 >= 9;
        let create =
            || compile_time::timed(Stage::Loading, || "cuBLASLt handle".into(), || LtHandle::new(&self.stream, hopper));
        self.lt.get_or_init(create).as_ref().map_err(Clone::clone)
    }

    /// Queues a read of a buffer twice the L2 size, so that the next timed kernel finds none of
    /// its inputs in the cache (what `triton.testing.do_bench` does between samples). Reading
    /// rather than writing (do_bench zeroes a buffer) leaves the L2 clean: with dirty lines in
    /// it, the timed kernel would also pay for writing the flush buffer back to memory, up to
    /// 50 MB on an H100, which makes read-mostly kernels such as reductions look slow.
    pub fn flush_l2(&self) -> std::result::Result<(), CudaError> {
        let mut buffer = lock(&self.flush_buffer);
        if buffer.is_none() {
            let floats = ((2 * self.facts.l2_cache).max(1 << 20) / 16) * 4;
            *buffer = Some(self.stream.alloc_zeros::<f32>(floats)?);
        }
        let buffer = buffer.as_ref().expect("allocated above");
        let function = self.load(FLUSH_SOURCE)?.function("read_all")?;
        let (n4, ptr) = ((buffer.len() / 4) as i64, DevicePtr::device_ptr(buffer, &self.stream).0);
        let blocks = self.facts.multiprocessors * 8;
        let mut launch = self.stream.launch_builder(&function);
        launch.arg(&ptr).arg(&n4);
        let config = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel reads n4 float4s of the zeroed buffer and writes only if their sum is
        // 1e38 (never): its arguments match its signature.
        unsafe { launch.launch(config) }?;
        Ok(())
    }
}

/// Streams through a buffer with L2-caching loads; the write it guards never happens on zeros,
/// but keeps the loads from being optimised away.
const FLUSH_SOURCE: &str = r#"
extern "C" __global__ void read_all(float4* data, long long n4) {
    float acc = 0.0f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        const float4 v = __ldcg(data + i);
        acc += (v.x + v.y) + (v.z + v.w);
    }
    if (acc == 1.0e38f) data[0].x = acc;
}
"#;

/// A loaded CUDA module: its kernels by name, and the CUBIN it came from.
#[derive(Debug)]
pub struct Module {
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    cubin_path: PathBuf,
    compiled_now: bool,
}

impl Module {
    /// The kernel `name` (an `extern "C" __global__` function of the source).
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(name) {
            return Ok(f.clone());
        }
        let f = self.module.load_function(name).map_err(|e| Error::Compile {
            tool: "cuModuleGetFunction".into(),
            message: format!("no kernel `{name}` in {}: {}", self.cubin_path.display(), CudaError::from(e)),
        })?;
        lock(&self.functions).insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// The names of the kernels looked up so far, sorted: which of the module's kernels have run.
    pub fn loaded_functions(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.functions).keys().cloned().collect();
        names.sort();
        names
    }

    /// The cached CUBIN's path (its CUDA C source sits beside it as `<key>.cu`).
    pub fn cubin_path(&self) -> &Path {
        &self.cubin_path
    }

    /// True when NVRTC compiled the module in this process; false when it came from the disk cache.
    pub fn compiled_now(&self) -> bool {
        self.compiled_now
    }
}

/// Stream-ordered allocations return freed memory to a pool that, by default, hands it back to the
/// driver at every synchronisation, making the next allocation slow. Keep it, as PyTorch's caching
/// allocator does.
fn keep_freed_memory_pooled(context: &CudaContext) -> std::result::Result<(), CudaError> {
    if !context.has_async_alloc() {
        return Ok(());
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold = u64::MAX;
    // SAFETY: valid out-pointers; the attribute takes a u64.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, context.cu_device()).result()?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()?;
    }
    Ok(())
}

/// Locks a mutex, carrying on if a panicking thread poisoned it (the data are plain caches).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
