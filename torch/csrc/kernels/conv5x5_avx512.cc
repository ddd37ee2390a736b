// conv5x5_avx512.cc: the direct 5×5 convolution kernels (conv5x5_kernels.h) for AVX-512F,
// one 512-bit register per vector. Compiled with -mavx512f -mavx2 -mfma (CMakeLists.txt); the
// driver calls it only where the CPU reports AVX-512F. Nothing but intrinsics is included, and
// everything but the table getter has internal linkage (see conv5x5.h).
#include <immintrin.h>

#include "conv5x5.h"

namespace ldt {
namespace conv5 {
namespace {

struct F512 {
  using T = float;
  static constexpr int64_t lanes = 16;
  struct V {
    __m512 v;
  };
  static constexpr int kFwdCo = 6, kFwdQ = 4;  // 24 accumulators
  static constexpr int kBwCo = 4, kBwKw = 5;   // 20 accumulators
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static V load(const float *p) { return {_mm512_loadu_ps(p)}; }
  static V loadn(const float *p, int n) { return {_mm512_maskz_loadu_ps(mask(n), p)}; }
  static void store(float *p, V a) { _mm512_storeu_ps(p, a.v); }
  static void storen(float *p, V a, int n) { _mm512_mask_storeu_ps(p, mask(n), a.v); }
  static V bcast(float s) { return {_mm512_set1_ps(s)}; }
  static V zero() { return {_mm512_setzero_ps()}; }
  static V add(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
  static V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
};

struct D512 {
  using T = double;
  static constexpr int64_t lanes = 8;
  struct V {
    __m512d v;
  };
  static constexpr int kFwdCo = 6, kFwdQ = 4;
  static constexpr int kBwCo = 4, kBwKw = 5;
  static __mmask8 mask(int n) { return static_cast<__mmask8>((1u << n) - 1u); }
  static V load(const double *p) { return {_mm512_loadu_pd(p)}; }
  static V loadn(const double *p, int n) { return {_mm512_maskz_loadu_pd(mask(n), p)}; }
  static void store(double *p, V a) { _mm512_storeu_pd(p, a.v); }
  static void storen(double *p, V a, int n) { _mm512_mask_storeu_pd(p, mask(n), a.v); }
  static V bcast(double s) { return {_mm512_set1_pd(s)}; }
  static V zero() { return {_mm512_setzero_pd()}; }
  static V add(V a, V b) { return {_mm512_add_pd(a.v, b.v)}; }
  static V fma(V a, V b, V c) { return {_mm512_fmadd_pd(a.v, b.v, c.v)}; }
};

#include "conv5x5_kernels.h"

LDT_CONV5_TABLE(avx512, F512, D512);

}  // namespace

const Kernels *kernels_avx512() { return &avx512; }

}  // namespace conv5
}  // namespace ldt
