// conv5x5.h: the interface between the direct 5×5 convolution driver (conv5x5.cc, compiled
// for the baseline ISA, with ATen) and its kernels (conv5x5_avx2.cc, conv5x5_avx512.cc,
// compiled with -mavx2 / -mavx512f and nothing from ATen or the C++ library in them, so that
// no inline function compiled for a wider ISA can be picked by the linker for other code).
// Plain structs and function pointers only: no inline functions here, for the same reason.
#pragma once

#include <stdint.h>

namespace ldt {
namespace conv5 {

// The kernel size the kernels are written for.
constexpr int64_t K = 5;

// Geom describes one convolution, stride 1, dilation 1, one group, K×K kernel; the driver
// fills every field (make_geom in conv5x5.cc). lanes is the vector width of the element
// type: 64 bytes (16 floats, 8 doubles) on both ISAs, so that the order of every sum is the
// same with AVX2 and AVX-512.
struct Geom {
  int64_t cin, cout, h, w, ph, pw;  // input channels and size, padding
  int64_t hp, wp, ho, wo;           // padded input, output
  int64_t q;                        // ho·wo: output positions of a plane
  int64_t qv;                       // ⌈q / lanes⌉: vectors per output plane
  int64_t lanes;
  int64_t xs_len;     // elements of one image's shifted input (see conv5x5_kernels.h), slack included
  int64_t gyp_len;    // elements of one image's output gradient, planes padded to whole vectors
  int64_t plane_len;  // elements of the buffer for one zero-padded input channel, slack included
};

// Ops are the kernels of one element type T.
template <typename T>
struct Ops {
  // fwd: y (n, cout, ho, wo) = conv(x (n, cin, h, w), w (cout, cin, K, K)) + bias (cout, or
  // null), for n images; scratch holds xs_len + plane_len elements.
  void (*fwd)(const Geom *g, int64_t n, const T *x, const T *w, const T *bias, T *y, T *scratch);
  // bwd_weight: gw (cout, cin, K, K) = Σ over the n images of the correlation of x with gy
  // (n, cout, ho, wo); scratch holds n·(xs_len + gyp_len) + plane_len elements. Lane l of
  // every sum takes the positions ≡ l (mod lanes) in image order; the lanes are added in
  // order at the end.
  void (*bwd_weight)(const Geom *g, int64_t n, const T *x, const T *gy, T *gw, T *scratch);
};

struct Kernels {
  const char *isa;
  Ops<float> f;
  Ops<double> d;
};

// Defined only where the build compiles the kernel files (x86-64).
const Kernels *kernels_avx2();
const Kernels *kernels_avx512();

}  // namespace conv5
}  // namespace ldt
