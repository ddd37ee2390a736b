// common.h: what the kernels of this folder share among themselves (never included by the
// binding layer, which sees kernels.h only).
#pragma once

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "../compat.h"
#include "kernels.h"

namespace ldt {

// dense_cpu_4d says whether x is a contiguous 4-d float32 or float64 CPU tensor: the input
// the max-pool and LRN loops take (others run libtorch's ops).
inline bool dense_cpu_4d(const at::Tensor &x) {
  return x.defined() && x.device().is_cpu() && x.layout() == at::kStrided && x.dim() == 4 &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) && x.is_contiguous();
}

namespace simd {
struct Kernels;
}
// simd_kernels is the table of the LRN, max-pool and ConvNet-3 block loops in use (lrn.cc).
const simd::Kernels *simd_kernels();

}  // namespace ldt
