// conv5x5_avx2.cc: the direct 5×5 convolution kernels (conv5x5_kernels.h) for AVX2 and FMA.
// A vector is 64 bytes here too (two 256-bit registers), so that every sum runs in the same
// order as with AVX-512 and both give the same bits. Compiled with -mavx2 -mfma
// (CMakeLists.txt); the driver calls it only where the CPU reports both. Nothing but
// intrinsics is included, and everything but the table getter has internal linkage.
#include <immintrin.h>

#include "conv5x5.h"

namespace ldt {
namespace conv5 {
namespace {

// lane_mask returns a 32-bit-lane mask for lanes [first, first + 8) of the first n.
inline __m256i lane_mask(int n, int first) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - first), iota);
}

struct F256 {
  using T = float;
  static constexpr int64_t lanes = 16;
  struct V {
    __m256 lo, hi;
  };
  static constexpr int kFwdCo = 6, kFwdQ = 1;  // 12 registers of accumulators
  static constexpr int kBwCo = 2, kBwKw = 2;   // 8
  static V load(const float *p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static V loadn(const float *p, int n) {
    return {_mm256_maskload_ps(p, lane_mask(n, 0)), _mm256_maskload_ps(p + 8, lane_mask(n, 8))};
  }
  static void store(float *p, V a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
  }
  static void storen(float *p, V a, int n) {
    _mm256_maskstore_ps(p, lane_mask(n, 0), a.lo);
    _mm256_maskstore_ps(p + 8, lane_mask(n, 8), a.hi);
  }
  static V bcast(float s) { return {_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
  static V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
};

// lane_mask64 is lane_mask for 64-bit lanes [first, first + 4).
inline __m256i lane_mask64(int n, int first) {
  const __m256i iota = _mm256_setr_epi64x(0, 1, 2, 3);
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - first), iota);
}

struct D256 {
  using T = double;
  static constexpr int64_t lanes = 8;
  struct V {
    __m256d lo, hi;
  };
  static constexpr int kFwdCo = 6, kFwdQ = 1;
  static constexpr int kBwCo = 2, kBwKw = 2;
  static V load(const double *p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }
  static V loadn(const double *p, int n) {
    return {_mm256_maskload_pd(p, lane_mask64(n, 0)), _mm256_maskload_pd(p + 4, lane_mask64(n, 4))};
  }
  static void store(double *p, V a) {
    _mm256_storeu_pd(p, a.lo);
    _mm256_storeu_pd(p + 4, a.hi);
  }
  static void storen(double *p, V a, int n) {
    _mm256_maskstore_pd(p, lane_mask64(n, 0), a.lo);
    _mm256_maskstore_pd(p + 4, lane_mask64(n, 4), a.hi);
  }
  static V bcast(double s) { return {_mm256_set1_pd(s), _mm256_set1_pd(s)}; }
  static V zero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static V add(V a, V b) { return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
  static V fma(V a, V b, V c) { return {_mm256_fmadd_pd(a.lo, b.lo, c.lo), _mm256_fmadd_pd(a.hi, b.hi, c.hi)}; }
};

#include "conv5x5_kernels.h"

LDT_CONV5_TABLE(avx2, F256, D256);

}  // namespace

const Kernels *kernels_avx2() { return &avx2; }

}  // namespace conv5
}  // namespace ldt
