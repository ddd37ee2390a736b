// simd_baseline.cc: simd_kernels.h for the baseline ISA (every x86-64 CPU; other
// architectures' default), the kernels where simd_avx2.cc does not run.
#include "simd.h"

namespace ldt {
namespace simd {
namespace {

#include "simd_kernels.h"

LDT_SIMD_TABLE(baseline);

}  // namespace

const Kernels *kernels_baseline() { return &baseline; }

#if !defined(LDT_SIMD_X86)
const Kernels *kernels_avx2() { return nullptr; }
#endif

}  // namespace simd
}  // namespace ldt
