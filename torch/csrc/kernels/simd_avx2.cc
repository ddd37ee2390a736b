// simd_avx2.cc: simd_kernels.h compiled with -mavx2 -mfma (CMakeLists.txt); lrn.cc calls it
// only where the CPU reports both. -ffp-contract=off keeps every a·b + c two roundings, as
// on the baseline ISA, so both give the same bits.
#include "simd.h"

namespace ldt {
namespace simd {
namespace {

#include "simd_kernels.h"

LDT_SIMD_TABLE(avx2);

}  // namespace

const Kernels *kernels_avx2() { return &avx2; }

}  // namespace simd
}  // namespace ldt
