//! The op catalogue's C expressions, which the CUDA eager kernels (and generated code) compute,
//! agree with its Rust semantics: each is compiled with the system C compiler and compared with
//! `apply` on ordinary values, signed zeros, infinities and NaN.

use engine::codecache::CCompiler;
use engine::op::{BinaryOp, UnaryOp};

const SAMPLES: [f32; 12] =
    [-3.5, -1.0, -0.25, -0.0, 0.0, 0.3, 1.0, 2.0, 7.5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];

/// Same value, allowing the last bits to differ between C's libm and Rust's.
fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 4.0 * f32::EPSILON * a.abs().max(b.abs())
}

#[test]
fn c_expressions_match_the_rust_semantics() {
    let mut source = String::from("#include <math.h>\n");
    for op in UnaryOp::ALL {
        source += &format!("float unary_{}(float x) {{ return {}; }}\n", op.name(), op.c_expr("x"));
    }
    for op in BinaryOp::ALL {
        source += &format!("float binary_{}(float a, float b) {{ return {}; }}\n", op.name(), op.c_expr("a", "b"));
    }
    let library = CCompiler::detect().unwrap().compile(&source).unwrap();
    for op in UnaryOp::ALL {
        // SAFETY: the signature matches the C definition above.
        let f = unsafe { library.get::<unsafe extern "C" fn(f32) -> f32>(&format!("unary_{}", op.name())) }.unwrap();
        for x in SAMPLES {
            let (c, rust) = (unsafe { f(x) }, op.apply(x));
            assert!(same(c, rust), "{}({x}): C says {c}, Rust says {rust}", op.name());
        }
    }
    for op in BinaryOp::ALL {
        // SAFETY: as above.
        let f =
            unsafe { library.get::<unsafe extern "C" fn(f32, f32) -> f32>(&format!("binary_{}", op.name())) }.unwrap();
        for a in SAMPLES {
            for b in SAMPLES {
                let (c, rust) = (unsafe { f(a, b) }, op.apply(a, b));
                assert!(same(c, rust), "{}({a}, {b}): C says {c}, Rust says {rust}", op.name());
            }
        }
    }
}
