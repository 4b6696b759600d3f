// Storage types and their conversions to and from the float every kernel computes in, the
// engine's own few lines instead of cuda_fp16.h and cuda_bf16.h (which NVRTC finds only where a
// CUDA toolkit's include directory is installed): bf16 and f16 elements are 16-bit patterns,
// converted with the GPU's `cvt` instructions, rounding to nearest even.
//
// Shared by the eager kernels (engine/src/device/cuda/kernels/*.cu) and Inductor's generated CUDA
// C (engine/src/inductor/codegen/cuda.rs prints this file first). The dtype codes match
// `dtype_code` in engine/src/device/cuda/params.rs.

#ifndef ENGINE_DTYPES_CUH
#define ENGINE_DTYPES_CUH

// Each storage type is a struct of its bits, so that C++ overloads tell bf16 from f16.
struct bf16 {
    unsigned short bits;
};
struct f16 {
    unsigned short bits;
};
struct f8e4m3 {
    unsigned char bits;
};
struct f8e5m2 {
    unsigned char bits;
};

#define DTYPE_F32 0
#define DTYPE_F16 1
#define DTYPE_BF16 2
#define DTYPE_F8E4M3 3
#define DTYPE_F8E5M2 4

// bf16 is the top half of a float: widening is a shift.
__device__ __forceinline__ float bf16_to_float(bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }

__device__ __forceinline__ bf16 float_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return bf16{h};
#else
    // Round to nearest even by adding just under half of the dropped part; NaN stays quiet NaN.
    const unsigned x = __float_as_uint(f);
    if (f != f) return bf16{(unsigned short)((x >> 16) | 0x40)};
    return bf16{(unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
#endif
}

__device__ __forceinline__ float f16_to_float(f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

__device__ __forceinline__ f16 float_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return f16{h};
}

// Two floats rounded into one 32-bit word of two 16-bit values, `lo` in the low half (the
// element at the lower address). PTX's `cvt.rn.{bf16x2,f16x2}.f32 d, a, b` puts `a` in the upper
// half of `d` and `b` in the lower (PTX ISA, "cvt"), hence the operand order.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return (unsigned)float_to_bf16(lo).bits | ((unsigned)float_to_bf16(hi).bits << 16);
#endif
}

__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return (unsigned)float_to_f16(lo).bits | ((unsigned)float_to_f16(hi).bits << 16);
#endif
}

// The 8-bit floats, as PyTorch's float8_e4m3fn and float8_e5m2 convert them (in software, as
// c10 does: a value past the largest finite one becomes NaN for e4m3 and infinity for e5m2).
__device__ __forceinline__ float minifloat_to_float(unsigned m, int mantissa, int bias) {
    const int e = (int)(m >> mantissa);
    const float f = (float)(m & ((1u << mantissa) - 1)) / (float)(1 << mantissa);
    return e == 0 ? ldexpf(f, 1 - bias) : ldexpf(1.0f + f, e - bias);
}

__device__ __forceinline__ float f8e4m3_to_float(f8e4m3 v) {
    const unsigned m = v.bits & 0x7fu;
    const float magnitude = m == 0x7fu ? __int_as_float(0x7fc00000) : minifloat_to_float(m, 3, 7);
    return (v.bits & 0x80u) ? -magnitude : magnitude;
}

__device__ __forceinline__ float f8e5m2_to_float(f8e5m2 v) {
    const unsigned m = v.bits & 0x7fu;
    float magnitude = minifloat_to_float(m, 2, 15);
    if (m == 0x7cu) magnitude = __int_as_float(0x7f800000);
    if (m > 0x7cu) magnitude = __int_as_float(0x7fc00000);
    return (v.bits & 0x80u) ? -magnitude : magnitude;
}

// |f| rounded to a minifloat of `mantissa` bits and bias `bias`, as bits; `overflow` past `largest`.
__device__ __forceinline__ unsigned float_to_minifloat(float f, int mantissa, int bias, float largest,
                                                       unsigned overflow) {
    const float a = fabsf(f);
    if (a != a) return 0x7fu;
    if (a > 3.0e38f) return overflow;  // infinity
    const int exponent = a == 0.0f ? 1 - bias : max(ilogbf(a), 1 - bias);
    const float step = ldexpf(1.0f, exponent - mantissa);
    const float rounded = rintf(a / step) * step;  // rintf rounds ties to even
    if (rounded > largest) return overflow;
    if (rounded == 0.0f) return 0;
    const int e = ilogbf(rounded);
    if (e < 1 - bias) return (unsigned)(rounded / ldexpf(1.0f, 1 - bias - mantissa));
    return ((unsigned)(e + bias) << mantissa) | (unsigned)((rounded / ldexpf(1.0f, e) - 1.0f) * (float)(1 << mantissa));
}

// GPUs with FP8 tensor cores (compute capability 8.9 on) round two floats to 8-bit floats in one
// instruction, `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b` (`a` into the upper byte of `d`,
// `b` into the lower). PTX requires `.satfinite` there, which saturates to the largest finite
// value; the few inputs the software conversion makes NaN (e4m3 past 464, the midpoint between
// 448 and the next step) or infinity (e5m2 from 61440) are patched in after, so both paths give
// the same bits. The software path below (two `ilogbf`, two `ldexpf`, divisions) is many times the
// instructions, enough to make a kernel that stores e4m3 compute-bound.
#if __CUDA_ARCH__ >= 890
// The byte `cvt` made of `f`, or the software conversion's NaN (e4m3) or infinity (e5m2) where it
// saturated instead.
__device__ __forceinline__ unsigned f8e4m3_patch(float f, unsigned bits) {
    return fabsf(f) <= 464.0f ? bits : (signbit(f) ? 0x80u : 0u) | 0x7fu;  // NaN fails the test too
}
__device__ __forceinline__ unsigned f8e5m2_patch(float f, unsigned bits) {
    const unsigned sign = signbit(f) ? 0x80u : 0u;
    if (f != f) return sign | 0x7fu;
    return fabsf(f) >= 61440.0f ? sign | 0x7cu : bits;
}

// Two floats rounded into the two bytes of a 16-bit word, `lo` in the low byte (the element at
// the lower address).
__device__ __forceinline__ unsigned pack_f8e4m3x2(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return f8e4m3_patch(lo, d & 0xffu) | (f8e4m3_patch(hi, (unsigned)d >> 8) << 8);
}
__device__ __forceinline__ unsigned pack_f8e5m2x2(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return f8e5m2_patch(lo, d & 0xffu) | (f8e5m2_patch(hi, (unsigned)d >> 8) << 8);
}

__device__ __forceinline__ f8e4m3 float_to_f8e4m3(float f) { return f8e4m3{(unsigned char)pack_f8e4m3x2(f, 0.0f)}; }
__device__ __forceinline__ f8e5m2 float_to_f8e5m2(float f) { return f8e5m2{(unsigned char)pack_f8e5m2x2(f, 0.0f)}; }
#else
__device__ __forceinline__ f8e4m3 float_to_f8e4m3(float f) {
    return f8e4m3{(unsigned char)((signbit(f) ? 0x80u : 0u) | float_to_minifloat(f, 3, 7, 448.0f, 0x7fu))};
}

__device__ __forceinline__ f8e5m2 float_to_f8e5m2(float f) {
    const float a = fabsf(f);
    const unsigned overflow = a >= 61440.0f ? 0x7cu : 0x7bu;  // round-to-nearest reaches infinity
    return f8e5m2{(unsigned char)((signbit(f) ? 0x80u : 0u) | float_to_minifloat(f, 2, 15, 57344.0f, overflow))};
}

__device__ __forceinline__ unsigned pack_f8e4m3x2(float lo, float hi) {
    return (unsigned)float_to_f8e4m3(lo).bits | ((unsigned)float_to_f8e4m3(hi).bits << 8);
}
__device__ __forceinline__ unsigned pack_f8e5m2x2(float lo, float hi) {
    return (unsigned)float_to_f8e5m2(lo).bits | ((unsigned)float_to_f8e5m2(hi).bits << 8);
}
#endif

// The two 16-bit values of a 32-bit word, the one at the lower address in the low half (the
// GPU is little-endian), widened: how a `bf16x2` or `half2` pair is unpacked.
__device__ __forceinline__ float bf16x2_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16x2_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float f16x2_lo(unsigned w) { return f16_to_float(f16{(unsigned short)(w & 0xffffu)}); }
__device__ __forceinline__ float f16x2_hi(unsigned w) { return f16_to_float(f16{(unsigned short)(w >> 16)}); }

// Vector loads and stores of four or eight neighbouring 16-bit elements (8 or 16 bytes; the
// caller guarantees that alignment), widened into or rounded from floats `d[0..N)`: what
// generated kernels use for bf16 and f16 buffers, as they read four floats with one `float4`.
__device__ __forceinline__ void vload4(const bf16* p, float* d) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    d[0] = bf16x2_lo(v.x), d[1] = bf16x2_hi(v.x), d[2] = bf16x2_lo(v.y), d[3] = bf16x2_hi(v.y);
}
__device__ __forceinline__ void vload4(const f16* p, float* d) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    d[0] = f16x2_lo(v.x), d[1] = f16x2_hi(v.x), d[2] = f16x2_lo(v.y), d[3] = f16x2_hi(v.y);
}
// ANCHOR: vload8
__device__ __forceinline__ void vload8(const bf16* p, float* d) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) d[2 * i] = bf16x2_lo(w[i]), d[2 * i + 1] = bf16x2_hi(w[i]);
}
// ANCHOR_END: vload8
__device__ __forceinline__ void vload8(const f16* p, float* d) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) d[2 * i] = f16x2_lo(w[i]), d[2 * i + 1] = f16x2_hi(w[i]);
}
__device__ __forceinline__ void vstore4(bf16* p, const float* s) {
    *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf16x2(s[0], s[1]), pack_bf16x2(s[2], s[3]));
}
__device__ __forceinline__ void vstore4(f16* p, const float* s) {
    *reinterpret_cast<uint2*>(p) = make_uint2(pack_f16x2(s[0], s[1]), pack_f16x2(s[2], s[3]));
}
__device__ __forceinline__ void vstore8(bf16* p, const float* s) {
    *reinterpret_cast<uint4*>(p) = make_uint4(pack_bf16x2(s[0], s[1]), pack_bf16x2(s[2], s[3]),
                                              pack_bf16x2(s[4], s[5]), pack_bf16x2(s[6], s[7]));
}
__device__ __forceinline__ void vstore8(f16* p, const float* s) {
    *reinterpret_cast<uint4*>(p) = make_uint4(pack_f16x2(s[0], s[1]), pack_f16x2(s[2], s[3]),
                                              pack_f16x2(s[4], s[5]), pack_f16x2(s[6], s[7]));
}

// Four neighbouring 8-bit floats as one 32-bit word (4-byte aligned, as the caller guarantees).
__device__ __forceinline__ void vload4(const f8e4m3* p, float* d) {
    const unsigned w = *reinterpret_cast<const unsigned*>(p);
#pragma unroll
    for (int i = 0; i < 4; i++) d[i] = f8e4m3_to_float(f8e4m3{(unsigned char)(w >> (8 * i))});
}
__device__ __forceinline__ void vload4(const f8e5m2* p, float* d) {
    const unsigned w = *reinterpret_cast<const unsigned*>(p);
#pragma unroll
    for (int i = 0; i < 4; i++) d[i] = f8e5m2_to_float(f8e5m2{(unsigned char)(w >> (8 * i))});
}
__device__ __forceinline__ void vstore4(f8e4m3* p, const float* s) {
    *reinterpret_cast<unsigned*>(p) = pack_f8e4m3x2(s[0], s[1]) | (pack_f8e4m3x2(s[2], s[3]) << 16);
}
__device__ __forceinline__ void vstore4(f8e5m2* p, const float* s) {
    *reinterpret_cast<unsigned*>(p) = pack_f8e5m2x2(s[0], s[1]) | (pack_f8e5m2x2(s[2], s[3]) << 16);
}

// Element `i` of a buffer of dtype `dtype`, as a float: what the eager kernels load. A kernel
// instantiated for one dtype passes it as a constant, so the switch folds to one path at compile
// time; the run-time instance passes one value for a whole launch.
__device__ __forceinline__ float load_as_float(const void* p, int dtype, long long i) {
    switch (dtype) {
        case DTYPE_F16: return f16_to_float(f16{__ldg(reinterpret_cast<const unsigned short*>(p) + i)});
        case DTYPE_BF16: return bf16_to_float(bf16{__ldg(reinterpret_cast<const unsigned short*>(p) + i)});
        case DTYPE_F8E4M3: return f8e4m3_to_float(f8e4m3{__ldg(reinterpret_cast<const unsigned char*>(p) + i)});
        case DTYPE_F8E5M2: return f8e5m2_to_float(f8e5m2{__ldg(reinterpret_cast<const unsigned char*>(p) + i)});
        default: return __ldg(reinterpret_cast<const float*>(p) + i);
    }
}

// Stores `v` rounded to `dtype` as element `i`.
__device__ __forceinline__ void store_from_float(void* p, int dtype, long long i, float v) {
    switch (dtype) {
        case DTYPE_F16: reinterpret_cast<f16*>(p)[i] = float_to_f16(v); break;
        case DTYPE_BF16: reinterpret_cast<bf16*>(p)[i] = float_to_bf16(v); break;
        case DTYPE_F8E4M3: reinterpret_cast<f8e4m3*>(p)[i] = float_to_f8e4m3(v); break;
        case DTYPE_F8E5M2: reinterpret_cast<f8e5m2*>(p)[i] = float_to_f8e5m2(v); break;
        default: reinterpret_cast<float*>(p)[i] = v;
    }
}

// Elements 4j .. 4j + 3 as a float4: one 16-byte load of f32, one 8-byte load of a 16-bit type
// (the caller guarantees the alignment: 4 * element size bytes), four byte loads of an 8-bit one.
__device__ __forceinline__ float4 load4_as_float(const void* p, int dtype, long long j) {
    if (dtype == DTYPE_F32) return __ldg(reinterpret_cast<const float4*>(p) + j);
    if (dtype == DTYPE_F16 || dtype == DTYPE_BF16) {
        const uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + j);
        if (dtype == DTYPE_BF16) return make_float4(bf16x2_lo(v.x), bf16x2_hi(v.x), bf16x2_lo(v.y), bf16x2_hi(v.y));
        return make_float4(f16x2_lo(v.x), f16x2_hi(v.x), f16x2_lo(v.y), f16x2_hi(v.y));
    }
    return make_float4(load_as_float(p, dtype, 4 * j), load_as_float(p, dtype, 4 * j + 1),
                       load_as_float(p, dtype, 4 * j + 2), load_as_float(p, dtype, 4 * j + 3));
}

// Stores elements 4j .. 4j + 3 from a float4, as `load4_as_float` reads them.
__device__ __forceinline__ void store4_from_float(void* p, int dtype, long long j, float4 v) {
    if (dtype == DTYPE_F32) {
        reinterpret_cast<float4*>(p)[j] = v;
    } else if (dtype == DTYPE_BF16) {
        reinterpret_cast<uint2*>(p)[j] = make_uint2(pack_bf16x2(v.x, v.y), pack_bf16x2(v.z, v.w));
    } else if (dtype == DTYPE_F16) {
        reinterpret_cast<uint2*>(p)[j] = make_uint2(pack_f16x2(v.x, v.y), pack_f16x2(v.z, v.w));
    } else {
        store_from_float(p, dtype, 4 * j, v.x);
        store_from_float(p, dtype, 4 * j + 1, v.y);
        store_from_float(p, dtype, 4 * j + 2, v.z);
        store_from_float(p, dtype, 4 * j + 3, v.w);
    }
}

// The address of element `i` of a buffer of `dtype`.
__device__ __forceinline__ const void* element_ptr(const void* p, int dtype, long long i) {
    const int size = dtype == DTYPE_F32 ? 4 : (dtype == DTYPE_F16 || dtype == DTYPE_BF16) ? 2 : 1;
    return reinterpret_cast<const char*>(p) + i * size;
}

#endif  // ENGINE_DTYPES_CUH
