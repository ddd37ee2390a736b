// image.cc: the ops of ConvNet-3 and of DSA augmentation that nn.cc lacks: group (and so
// instance) normalisation, and affine sampling grids with bilinear grid sampling.
#include <ATen/ATen.h>

#include "internal.h"

extern "C" {

ldt_error ldt_group_norm(ldt_tensor *out, ldt_tensor x, int64_t groups, ldt_tensor weight, ldt_tensor bias,
                         double eps) {
  LDT_TRY {
    auto &in = ldt::T(x);
    if (in.dim() < 2) throw std::invalid_argument("group_norm expects at least 2 dimensions (N, C, ...)");
    if (groups < 1 || in.size(1) % groups != 0)
      throw std::invalid_argument("group_norm: " + std::to_string(in.size(1)) + " channels do not split into " +
                                  std::to_string(groups) + " groups");
    ldt::set_out(out, at::group_norm(in, groups, ldt::opt(weight), ldt::opt(bias), eps, true));
  }
  LDT_CATCH
}

ldt_error ldt_affine_grid(ldt_tensor *out, ldt_tensor theta, const int64_t *size, int ndim, int align_corners) {
  LDT_TRY {
    if (ndim != 4) throw std::invalid_argument("affine_grid: size must be (N, C, H, W)");
    ldt::set_out(out, at::affine_grid_generator(ldt::T(theta), ldt::ints(size, ndim), align_corners != 0));
  }
  LDT_CATCH
}

ldt_error ldt_grid_sample(ldt_tensor *out, ldt_tensor x, ldt_tensor grid, int mode, int padding_mode,
                          int align_corners) {
  LDT_TRY {
    if (mode < 0 || mode > 2) throw std::invalid_argument("grid_sample: unknown interpolation mode " + std::to_string(mode));
    if (padding_mode < 0 || padding_mode > 2)
      throw std::invalid_argument("grid_sample: unknown padding mode " + std::to_string(padding_mode));
    ldt::set_out(out, at::grid_sampler(ldt::T(x), ldt::T(grid), mode, padding_mode, align_corners != 0));
  }
  LDT_CATCH
}

}  // extern "C"
