// simd.h: the interface between the drivers lrn.cc, maxpool.cc and convblock.cc (compiled
// for the baseline ISA, with ATen) and the per-image LRN loops, per-plane max-pool loop and
// ConvNet-3 block loops of simd_kernels.h, compiled once per ISA (simd_baseline.cc; simd_avx2.cc with -mavx2) with
// nothing from ATen or the C++ library in them, so that no inline function compiled for a
// wider ISA can be picked by the linker for other code (as conv5x5.h). Both files are compiled with -ffp-contract=off and the loops are
// elementwise, so both ISAs give the same bits. Plain structs and function pointers only.
#pragma once

#include <stdint.h>

namespace ldt {
namespace simd {

// LRNArgs are local_response_norm's settings: the window of channel c is
// [c − size/2, c + (size−1)/2], s = k + α·Σx²/size, y = x / s^β.
struct LRNArgs {
  int64_t size;
  double alpha, beta, k;
};

// LRNOps are the loops of one element type T over one image of C planes of P elements.
template <typename T>
struct LRNOps {
  // forward: y = lrn(x), or lrn(relu(x)) when relu is non-zero; s, d (and r when relu) are
  // scratch buffers of C·P elements.
  void (*forward)(const T *x, T *y, int64_t C, int64_t P, const LRNArgs *a, int relu, T *s, T *d, T *r);
  // backward: gx = the gradient of Σ g·lrn(x) with respect to x; s, d hold C·P elements,
  // acc P.
  void (*backward)(const T *x, const T *g, T *gx, int64_t C, int64_t P, const LRNArgs *a, T *s, T *d, T *acc);
};

// PoolGeom is one max_pool2d (dilation 1): input planes H×W, output Ho×Wo, kernel, stride,
// padding, and pc, the columns of each of the sw phases a padded row is split into.
struct PoolGeom {
  int64_t H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, pc;
};

// PoolOps is the max-pool loop of one element type T, whose winning taps are kept as Tap
// (int32 for float, int64 for double).
template <typename T, typename Tap>
struct PoolOps {
  // planes: out (and ind, the winners' h·W + w in the plane, when not null) for the planes
  // [begin, end) of in; phases (H·sw·pc elements, all −∞ on the first call: only in-bounds
  // columns are written), best and tap (Wo each) are scratch.
  void (*planes)(const T *in, T *out, int64_t *ind, int64_t begin, int64_t end, const PoolGeom *g, T *phases,
                 T *best, Tap *tap);
};

// BlockGeom is one ConvNet-3 block (convblock.cc): a K×K convolution (stride 1, dilation 1,
// padding ph, pw) of Cin planes H×W into Cout planes Ho×Wo, instance normalisation with eps,
// ReLU, and 2×2 average pooling into Hp×Wp (floor mode).
struct BlockGeom {
  int64_t Cin, H, W, kh, kw, ph, pw, Cout, Ho, Wo, Hp, Wp;
  double eps;
};

// BlockOps are the block's loops of one element type T. The forward loops keep each output
// plane's mean and 1/√(var + eps) in stats (two doubles per plane) when it is not null; the
// backward loops take them back and add the gradients of w, bias, γ and β into double
// accumulators.
template <typename T>
struct BlockOps {
  // image: one image x (Cin×H×W) into out (Cout×Hp×Wp): the convolution with w
  // (Cout×Cin×kh×kw) and b (Cout, or null), one output plane at a time, each normalised with
  // γ, β, rectified and pooled while in cache; padded (Cin·(H+2ph)·(W+2pw)), plane (Ho·Wo)
  // and row (4·Wp) are scratch.
  void (*image)(const T *x, const T *w, const T *b, const T *gamma, const T *beta, const BlockGeom *g, T *out,
                T *padded, T *plane, T *row, double *stats);
  // planes: the normalisation, ReLU and pooling of the convolution's output planes
  // [begin, end) of in (planes Ho×Wo, plane p of channel p mod Cout) into out; row (4·Wp) is
  // scratch.
  void (*planes)(const T *in, const T *gamma, const T *beta, int64_t begin, int64_t end, const BlockGeom *g, T *out,
                 T *row, double *stats);
  // image_backward: image's gradients from gout (Cout×Hp×Wp): adds into dw (Cout·Cin·kh·kw),
  // db, dg, dbe (Cout) and, when dx is not null, writes dx (Cin×H×W); padded and dpadded
  // (Cin·(H+2ph)·(W+2pw)), plane and dz (Ho·Wo) and g2 (Wo) are scratch.
  void (*image_backward)(const T *x, const T *w, const T *b, const T *gamma, const T *beta, const double *stats,
                         const T *gout, const BlockGeom *g, double *dw, double *db, double *dg, double *dbe, T *dx,
                         T *padded, T *plane, T *dz, T *dpadded, T *g2);
  // planes_backward: the gradient dz with respect to planes [begin, end) of in (the
  // convolution's output) from gout, adding the bias's, γ's and β's gradients into db, dg and
  // dbe (Cout); g2 (Wo) is scratch.
  void (*planes_backward)(const T *in, const T *gamma, const T *beta, const double *stats, const T *gout,
                          int64_t begin, int64_t end, const BlockGeom *g, T *dz, double *db, double *dg, double *dbe,
                          T *g2);
};

struct Kernels {
  LRNOps<float> lrn_f;
  LRNOps<double> lrn_d;
  PoolOps<float, int32_t> pool_f;
  PoolOps<double, int64_t> pool_d;
  BlockOps<float> block_f;
  BlockOps<double> block_d;
};

const Kernels *kernels_baseline();
// kernels_avx2 is null where the build has no AVX2 file (not x86-64).
const Kernels *kernels_avx2();

}  // namespace simd
}  // namespace ldt
