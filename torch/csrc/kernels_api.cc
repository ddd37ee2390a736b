// kernels_api.cc: the C API of the shim's own CPU kernels (kernels/: direct 5×5
// convolutions, max-pools, LRN, ConvNet-3's block, the cache of large CPU blocks): handles
// in, handles out, each call inside the exception barrier. The kernels themselves know
// nothing of handles or of shim.h (kernels/kernels.h).
#include <ATen/ATen.h>

#include <stdexcept>

#include "internal.h"
#include "kernels/kernels.h"

namespace {

at::IntArrayRef pair(const int64_t *p) {
  if (p == nullptr) throw std::invalid_argument("null (h, w) pair");
  return at::IntArrayRef(p, 2);
}

at::Tensor opt_tensor(ldt_tensor h) {
  auto b = ldt::opt(h);
  return b ? *b : at::Tensor();
}

}  // namespace

extern "C" {

ldt_error ldt_conv2d_direct(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias, const int64_t *stride,
                            const int64_t *padding, const int64_t *dilation, int64_t groups) {
  LDT_TRY {
    auto &in = ldt::T(x), &wt = ldt::T(w);
    const at::Tensor bt = opt_tensor(bias);
    ldt::set_out(out, ldt::kernels::conv2d_direct(in, wt, bt, pair(stride), pair(padding), pair(dilation), groups));
  }
  LDT_CATCH
}

ldt_error ldt_conv2d_max_pool2x2(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias, const int64_t *stride,
                                 const int64_t *padding, const int64_t *dilation, int64_t groups) {
  LDT_TRY {
    auto &in = ldt::T(x), &wt = ldt::T(w);
    const at::Tensor bt = opt_tensor(bias);
    ldt::set_out(out,
                 ldt::kernels::conv2d_max_pool2x2(in, wt, bt, pair(stride), pair(padding), pair(dilation), groups));
  }
  LDT_CATCH
}

ldt_error ldt_conv2d_max_pool2d(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, int64_t groups,
                                const int64_t *pool_kernel, const int64_t *pool_stride, const int64_t *pool_padding,
                                int ceil_mode) {
  LDT_TRY {
    auto &in = ldt::T(x), &wt = ldt::T(w);
    const at::Tensor bt = opt_tensor(bias);
    auto st = pair(stride), pad = pair(padding), dil = pair(dilation);
    auto pk = pair(pool_kernel), ps = pair(pool_stride), pp = pair(pool_padding);
    ldt::set_out(out, ldt::kernels::conv2d_max_pool2d(in, wt, bt, st, pad, dil, groups, pk, ps, pp, ceil_mode != 0));
  }
  LDT_CATCH
}

const char *ldt_direct_conv_isa(void) { return ldt::kernels::direct_conv_isa(); }

ldt_error ldt_set_direct_conv(const char *mode) {
  LDT_TRY { ldt::kernels::set_direct_conv(mode); }
  LDT_CATCH
}

ldt_error ldt_max_pool2x2(ldt_tensor *out, ldt_tensor x) {
  LDT_TRY { ldt::set_out(out, ldt::kernels::max_pool2x2(ldt::T(x))); }
  LDT_CATCH
}

ldt_error ldt_max_pool2d_direct(ldt_tensor *out, ldt_tensor x, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, int ceil_mode) {
  LDT_TRY {
    if (kernel == nullptr || stride == nullptr || padding == nullptr) throw std::invalid_argument("null (h, w) pair");
    ldt::set_out(out, ldt::kernels::max_pool2d_direct(ldt::T(x), pair(kernel), pair(stride), pair(padding),
                                                      ceil_mode != 0));
  }
  LDT_CATCH
}

ldt_error ldt_set_simd_isa(const char *mode) {
  LDT_TRY { ldt::kernels::set_simd_isa(mode); }
  LDT_CATCH
}

const char *ldt_simd_isa(void) { return ldt::kernels::simd_isa(); }

ldt_error ldt_conv_norm_relu_pool(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                  const int64_t *padding, ldt_tensor gamma, ldt_tensor beta, double eps) {
  LDT_TRY {
    auto &in = ldt::T(x), &wt = ldt::T(w), &ga = ldt::T(gamma), &be = ldt::T(beta);
    const at::Tensor bt = opt_tensor(bias);
    ldt::set_out(out, ldt::kernels::conv_norm_relu_pool(in, wt, bt, pair(padding), ga, be, eps));
  }
  LDT_CATCH
}

ldt_error ldt_set_cpu_block_cache(int64_t max_bytes) {
  LDT_TRY { ldt::kernels::set_cpu_block_cache(max_bytes); }
  LDT_CATCH
}

void ldt_cpu_block_cache_stats(int64_t *cached_bytes, int64_t *maps, int64_t *hits) {
  try {
    ldt::kernels::cpu_block_cache_stats(cached_bytes, maps, hits);
  } catch (...) {  // a mutex that cannot be locked: report nothing kept
    if (cached_bytes != nullptr) *cached_bytes = 0;
    if (maps != nullptr) *maps = 0;
    if (hits != nullptr) *hits = 0;
  }
}

}  // extern "C"
