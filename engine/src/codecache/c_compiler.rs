//! The system C compiler as a JIT, the role `CppCodeCache` plays for TorchInductor on CPU:
//! generated C is compiled to a shared library (with OpenMP when the compiler supports it),
//! cached on disk, and loaded into the process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock, RwLock};

use super::disk::{DiskCache, cache_key};
use crate::compile_time::{self, Stage};
use crate::error::{Error, Result};

/// A detected C compiler: which program, its version line, and which of the optional flags
/// (`-fopenmp`, `-march=native`, ...) it accepts.
///
/// Which flags work is known only by trying them, and trying each costs a compiler run (about as
/// long as compiling a small kernel). So a compiler met for the first time is assumed to accept
/// them all: the first compile tries them together, and only if it fails are the flags probed one
/// by one (in parallel), remembered in the disk cache, and the compile run again with the flags
/// that work. A process that finds the answers remembered uses them from the start.
#[derive(Debug)]
pub struct CCompiler {
    program: String,
    version: String,
    cpu: String,
    support: RwLock<Support>,
    /// Held while the flags are probed, so that compiles failing at once probe once.
    settling: Mutex<()>,
}

/// Which optional flags the compiler is taken to accept.
#[derive(Clone, Debug, PartialEq)]
struct Support {
    openmp: bool,
    tuning: Vec<&'static str>,
    /// Probed (now or by an earlier process) rather than assumed.
    probed: bool,
}

impl CCompiler {
    /// The compiler named by `$CC`, or `cc`, found once per process. Fails with a set-up error
    /// saying how to install one when none runs.
    pub fn detect() -> Result<&'static CCompiler> {
        static DETECTED: OnceLock<std::result::Result<CCompiler, String>> = OnceLock::new();
        DETECTED.get_or_init(probe).as_ref().map_err(|problem| Error::Setup {
            problem: problem.clone(),
            fix: "install a C compiler (Debian/Ubuntu: `apt install gcc`) or set CC to one (`grader doctor` checks \
                  this); compiled graphs also run without one on Inductor's interpreter target \
                  (`inductor::Config { target: TargetKind::Interpreter, .. }`)"
                .into(),
        })
    }

    /// The program run (`cc`, `gcc`, or `$CC`).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The first line of `--version`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Whether generated code may use `#pragma omp parallel for`.
    pub fn openmp(&self) -> bool {
        self.support().openmp
    }

    fn support(&self) -> Support {
        self.support.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The flags every generated library is built with.
    pub fn flags(&self) -> Vec<&'static str> {
        flags_for(&self.support())
    }

    /// Everything about the compiler that changes what it builds from one source: its version,
    /// its flags and the CPU `-march=native` targets. Part of every cache key of code it builds.
    pub fn identity(&self) -> String {
        identity_of(&self.version, &self.support(), &self.cpu)
    }

    /// Compiles `source` into a shared library through the global disk cache and loads it.
    pub fn compile(&self, source: &str) -> Result<SharedLibrary> {
        self.compile_in(DiskCache::global(), source).map(|(library, _)| library)
    }

    /// Compiles every source into a shared library of its own, several at a time
    /// ([`compile_time::parallel_jobs`]), through the global disk cache, and loads them.
    pub fn compile_all(&self, sources: Vec<String>) -> Result<Vec<SharedLibrary>> {
        compile_time::parallel_jobs(sources, |source| self.compile(&source)).into_iter().collect()
    }

    /// Like [`CCompiler::compile`] with an explicit cache; also says whether the compiler ran
    /// (`true`) or the cache already held the library (`false`).
    pub fn compile_in(&self, cache: &DiskCache, source: &str) -> Result<(SharedLibrary, bool)> {
        let support = self.support();
        let built = self.build_in(cache, source, &support);
        let (path, built) = match built {
            Err(error) if !support.probed => {
                // The flags were assumed: find out which work, and try once more if that changes them.
                let probed = self.settle();
                if probed == support {
                    return Err(error);
                }
                self.build_in(cache, source, &probed)?
            }
            other => other?,
        };
        let library = compile_time::timed(Stage::Loading, || library_name(&path), || SharedLibrary::load(&path))?;
        Ok((library, built))
    }

    /// The library for `source` built with `support`'s flags: from the cache, or compiled now.
    fn build_in(&self, cache: &DiskCache, source: &str, support: &Support) -> Result<(PathBuf, bool)> {
        let key = cache_key(&[source.as_bytes(), identity_of(&self.version, support, &self.cpu).as_bytes()]);
        let what = || format!("{} ({key:.12}.so)", kernel_names(source));
        compile_time::timed_cached(
            Stage::CCompile,
            what,
            || {
                cache.get_or_build(&key, "so", |out| {
                    // Keep the source beside the library: learners can open exactly what was compiled.
                    let source_path = cache.dir().join(format!("{key}.c"));
                    std::fs::write(&source_path, source)
                        .map_err(|e| Error::Io { path: source_path.clone(), message: e.to_string() })?;
                    self.run(&source_path, out, &flags_for(support))
                })
            },
            |built| matches!(built, Ok((_, false))),
        )
    }

    /// Probes every optional flag (once per process, and once per machine through the disk
    /// cache) and takes the answers from now on.
    fn settle(&self) -> Support {
        let _probing = self.settling.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.support();
        if current.probed {
            return current;
        }
        let probes: Vec<&Probe> = std::iter::once(&OPENMP_PROBE).chain(TUNING.iter()).collect();
        let answers =
            compile_time::parallel_jobs(probes, |probe| remembered_support(&self.program, &self.version, probe));
        let support = Support {
            openmp: answers[0],
            tuning: TUNING.iter().zip(&answers[1..]).filter(|(_, ok)| **ok).map(|(p, _)| p.flag).collect(),
            probed: true,
        };
        *self.support.write().unwrap_or_else(|e| e.into_inner()) = support.clone();
        support
    }

    fn run(&self, source: &Path, out: &Path, flags: &[&str]) -> Result<()> {
        let output = Command::new(&self.program)
            .args(flags)
            .arg("-o")
            .arg(out)
            .arg(source)
            .arg("-lm")
            .output()
            .map_err(|e| Error::Compile { tool: self.program.clone(), message: e.to_string() })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first: Vec<&str> = stderr.lines().take(20).collect();
        Err(Error::Compile {
            tool: self.program.clone(),
            message: format!("compiling {} failed:\n{}", source.display(), first.join("\n")),
        })
    }
}

/// The flags a library is built with when the compiler accepts `support`'s optional ones.
fn flags_for(support: &Support) -> Vec<&'static str> {
    // -fno-trapping-math lets GCC turn the vector math's selects around float conversions
    // into vector blends (the generated code never reads floating-point exception flags);
    // with it, every function of the vector math vectorizes. It changes no result.
    let mut flags = vec!["-O3", "-fno-math-errno", "-fno-trapping-math", "-std=c11", "-shared", "-fPIC"];
    flags.extend(&support.tuning);
    if support.openmp {
        flags.push("-fopenmp");
    }
    flags
}

fn identity_of(version: &str, support: &Support, cpu: &str) -> String {
    format!("{version}\n{}\n{cpu}", flags_for(support).join(" "))
}

/// The kernels a generated C source defines (functions taking `int64_t xnumel`), for the compile
/// log; empty for other sources.
fn kernel_names(source: &str) -> String {
    let names: Vec<&str> = source
        .lines()
        .filter(|l| l.contains("int64_t xnumel)"))
        .filter_map(|l| l.strip_prefix("void ").and_then(|rest| rest.split('(').next()))
        .collect();
    names.join(", ")
}

/// `dlopen <file name>`, for the compile log.
fn library_name(path: &Path) -> String {
    format!("dlopen {}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
}

fn probe() -> std::result::Result<CCompiler, String> {
    let program = std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into());
    found(program)
}

/// The compiler `program`, if it runs, with the flags an earlier process found it accepts, or all
/// of them assumed.
fn found(program: String) -> std::result::Result<CCompiler, String> {
    let output = Command::new(&program)
        .arg("--version")
        .output()
        .map_err(|e| format!("no C compiler: could not run `{program}` ({e})"))?;
    let version = String::from_utf8_lossy(&output.stdout).lines().next().unwrap_or("unknown").to_string();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| info.lines().find(|l| l.starts_with("model name")).map(str::to_string))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let support = remembered(&program, &version).unwrap_or_else(|| Support {
        openmp: true,
        tuning: TUNING.iter().map(|p| p.flag).collect(),
        probed: false,
    });
    if support.openmp {
        idle_openmp_threads_sleep();
    }
    Ok(CCompiler { program, version, cpu, support: RwLock::new(support), settling: Mutex::new(()) })
}

/// The answers an earlier process remembered for every optional flag, if it probed them all.
fn remembered(program: &str, version: &str) -> Option<Support> {
    let answer = |probe: &Probe| DiskCache::global().read(&probe_key(program, version, probe), "probe");
    let openmp = answer(&OPENMP_PROBE)?;
    let mut tuning = Vec::new();
    for probe in &TUNING {
        if answer(probe)? == b"yes" {
            tuning.push(probe.flag);
        }
    }
    Some(Support { openmp: openmp == b"yes", tuning, probed: true })
}

/// Makes OpenMP's idle threads sleep instead of spinning, unless the user chose otherwise.
///
/// The engine's own kernels run on its thread pool (`parallel`), but custom ops' kernels and learners'
/// replacement printers may use `#pragma omp parallel for`, and their team shares the cores with
/// the pool. By default an OpenMP thread spins for a while after each parallel region, keeping
/// the pool's workers off its core, which made a compiled MLP ten times slower on a small machine
/// (bench/NOTES-cpu.md, "One pool of threads"). libgomp reads
/// `OMP_WAIT_POLICY` once, when it is loaded with the first generated library, which only
/// happens after this probe.
fn idle_openmp_threads_sleep() {
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        // SAFETY: setting a variable races only with C code reading the environment on another
        // thread at the same moment; the engine runs this once, from the compiler probe, before
        // any generated library (the only C code it brings) is loaded.
        unsafe { std::env::set_var("OMP_WAIT_POLICY", "PASSIVE") };
    }
}

/// A flag the compiler may lack, and a source that builds only if it works.
struct Probe {
    flag: &'static str,
    source: &'static str,
}

/// OpenMP: the compiler may lack libgomp even where it knows the flag.
const OPENMP_PROBE: Probe =
    Probe { flag: "-fopenmp", source: "#include <omp.h>\nint threads(void) { return omp_get_max_threads(); }\n" };

/// Any source: a tuning flag only has to be accepted.
const ANY_SOURCE: &str = "int one(void) { return 1; }\n";

/// Flags that make generated code faster, each used where the compiler accepts it (a compiler
/// without one builds slower but correct code). None changes a result.
const TUNING: [Probe; 4] = [
    // Code for this machine's CPU: its vector instructions. The CPU model is part of the cache
    // key, so a cache directory shared with another machine never hands it a library it cannot
    // run. Some cross or embedded compilers lack the flag.
    Probe { flag: "-march=native", source: ANY_SOURCE },
    // GCC vectorizes with 256-bit registers on Intel CPUs that have 512-bit ones (Skylake to
    // Sapphire Rapids), for fear of the lower clock of 512-bit code on the first of them; the
    // generated kernels are arithmetic-bound loops that gain more from twice the lanes
    // (bench/NOTES-cpu.md, "Compiler flags"). It states a preference only: a CPU
    // without 512-bit vectors gets the code it got before. x86 compilers only.
    Probe { flag: "-mprefer-vector-width=512", source: ANY_SOURCE },
    // GCC vectorizes the leftover iterations of a vectorized loop again with narrower vectors:
    // for the long loop bodies of fused kernels (eight `tanh` in four groups) that second copy
    // took a third of the compile time, for the last few elements of each chunk. GCC only.
    Probe { flag: "--param=vect-epilogues-nomask=0", source: ANY_SOURCE },
    // `#pragma omp simd` (sums and the `maximum` reduction in vector lanes) without OpenMP's
    // runtime: with -fopenmp too it changes nothing; where libgomp is missing it keeps the
    // reductions vectorized.
    Probe { flag: "-fopenmp-simd", source: ANY_SOURCE },
];

/// [`supports`], remembered in the disk cache under the compiler's name and version: the probe
/// compiles a file, which would cost every new process tens of milliseconds before its first
/// kernel could come out of the cache.
fn remembered_support(program: &str, version: &str, probe: &Probe) -> bool {
    let answer = DiskCache::global().get_or_build(&probe_key(program, version, probe), "probe", |out| {
        let answer: &[u8] = if supports(program, probe) { b"yes" } else { b"no" };
        std::fs::write(out, answer).map_err(|e| Error::Io { path: out.to_path_buf(), message: e.to_string() })
    });
    match answer.and_then(|(path, _)| std::fs::read(&path).map_err(|e| Error::Io { path, message: e.to_string() })) {
        Ok(bytes) => bytes == b"yes",
        // An unusable cache directory only costs the probe.
        Err(_) => supports(program, probe),
    }
}

fn probe_key(program: &str, version: &str, probe: &Probe) -> String {
    cache_key(&[b"flag-probe", program.as_bytes(), version.as_bytes(), probe.flag.as_bytes()])
}

/// Whether `program` can build the probe's source into a shared library with its flag.
fn supports(program: &str, probe: &Probe) -> bool {
    // One folder per probe: probes run at the same time.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("engine-cc-probe-{}-{n}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return false;
    }
    let source = dir.join("probe.c");
    let ok = std::fs::write(&source, probe.source).is_ok()
        && Command::new(program)
            .args(["-shared", "-fPIC", probe.flag, "-o"])
            .arg(dir.join("probe.so"))
            .arg(&source)
            .output()
            .is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    ok
}

/// A loaded shared library; symbols stay valid while it lives.
#[derive(Debug)]
pub struct SharedLibrary {
    library: libloading::Library,
    path: PathBuf,
}

impl SharedLibrary {
    /// Loads the library for the rest of the process, like PyTorch's `CppCodeCache`: its code
    /// stays mapped even after this handle is dropped, because OpenMP worker threads that ran it
    /// live on in the process, and unmapping code they may still be parked in crashes it.
    fn load(path: &Path) -> Result<SharedLibrary> {
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
            // SAFETY: the library was built by us from generated C with no initialisers that run
            // code on load beyond the C runtime's own.
            unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE) }.map(Into::into)
        };
        #[cfg(not(unix))]
        // SAFETY: as above.
        let opened = unsafe { libloading::Library::new(path) };
        let library = opened
            .map_err(|e| Error::Compile { tool: "dlopen".into(), message: format!("{}: {e}", path.display()) })?;
        Ok(SharedLibrary { library, path: path.to_path_buf() })
    }

    /// Where the library file is (in the disk cache, beside its `.c` source).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Looks up a function by name.
    ///
    /// # Safety
    /// `T` must be the function's true signature (an `unsafe extern "C" fn(...)` type).
    pub unsafe fn get<T>(&self, symbol: &str) -> Result<libloading::Symbol<'_, T>> {
        // SAFETY: forwarded to the caller: T matches the symbol's type.
        unsafe { self.library.get(symbol.as_bytes()) }.map_err(|e| Error::Compile {
            tool: "dlsym".into(),
            message: format!("{symbol} in {}: {e}", self.path.display()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_loads_and_calls_a_function() {
        let cc = CCompiler::detect().expect("CI machines have a C compiler");
        let dir = std::env::temp_dir().join(format!("engine-cc-test-{}", std::process::id()));
        let cache = DiskCache::at(dir.clone());
        let source = "float twice(float x) { return 2.0f * x; }\n";
        let (lib, built) = cc.compile_in(&cache, source).unwrap();
        assert!(built);
        // SAFETY: the signature matches the C definition above.
        let twice = unsafe { lib.get::<unsafe extern "C" fn(f32) -> f32>("twice") }.unwrap();
        assert_eq!(unsafe { twice(21.0) }, 42.0);
        let (_, built_again) = cc.compile_in(&cache, source).unwrap();
        assert!(!built_again);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_flag_the_compiler_lacks_is_left_out() {
        let cc = CCompiler::detect().unwrap();
        let unknown = Probe { flag: "-fno-such-flag-anywhere", source: ANY_SOURCE };
        assert!(!supports(cc.program(), &unknown));
        assert!(supports(cc.program(), &TUNING[0]), "GCC and Clang know -march=native");
        assert!(cc.flags().contains(&"-march=native"));
    }

    /// A compiler that refuses one of the assumed flags: the first compile fails, the flags are
    /// probed, and the compile runs again without it.
    #[test]
    fn a_refused_flag_is_found_and_left_out() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("engine-cc-picky-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wrapper = dir.join("picky-cc");
        let script = "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -mprefer-vector-width=512 ] && { echo \"picky-cc: \
                      unrecognized option $a\" >&2; exit 1; }; done\nexec cc \"$@\"\n";
        std::fs::write(&wrapper, script).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cc = found(wrapper.to_string_lossy().into_owned()).unwrap();
        let cache = DiskCache::at(dir.join("cache"));
        let (lib, built) = cc.compile_in(&cache, "float twice(float x) { return 2.0f * x; }\n").unwrap();
        assert!(built);
        // SAFETY: the signature matches the C definition above.
        let twice = unsafe { lib.get::<unsafe extern "C" fn(f32) -> f32>("twice") }.unwrap();
        assert_eq!(unsafe { twice(4.0) }, 8.0);
        assert!(!cc.flags().contains(&"-mprefer-vector-width=512"), "{:?}", cc.flags());
        assert!(cc.flags().contains(&"-march=native"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_syntax_error_reports_the_compiler_message() {
        let cc = CCompiler::detect().unwrap();
        let cache = DiskCache::at(std::env::temp_dir().join(format!("engine-cc-bad-{}", std::process::id())));
        let err = cc.compile_in(&cache, "float broken( {").unwrap_err().to_string();
        assert!(err.contains("error"), "{err}");
    }
}
