// compat.h: the one place where the shim adapts to the libtorch it is compiled against
// (1.13 through 2.x). Included by internal.h; never by Go.
//
// Optionals: libtorch up to 2.3 has its own c10::optional (and c10::nullopt); from 2.4 on
// c10::optional is only an alias of std::optional, which its APIs take, and the alias may
// go. The shim spells ldt::optional / ldt::nullopt and this header maps them to
// c10::optional before 2.4 and std::optional from 2.4 (without including
// c10/util/Optional.h there).
#pragma once

#include <torch/csrc/api/include/torch/version.h>

#define LDT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if LDT_TORCH_AT_LEAST(2, 4)
#include <optional>
namespace ldt {
template <class T>
using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;
}  // namespace ldt
#else
#include <c10/util/Optional.h>
namespace ldt {
template <class T>
using optional = c10::optional<T>;
inline constexpr c10::nullopt_t nullopt = c10::nullopt;
}  // namespace ldt
#endif

// c10::Allocator: libtorch 1.13 declares `DataPtr allocate(size_t) const`; later ones (the
// shim is compile-checked against 2.6) declare allocate non-const and add a pure virtual
// `copy_data(dest, src, n) const`. Which shape the header has is detected, not inferred from
// the version. ldt::Allocator is c10::Allocator with the right allocate, which calls the
// derived class's `DataPtr allocate_block(size_t) const`, and copy_data (a memcpy) where the
// base declares it.
#include <c10/core/Allocator.h>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace ldt {
namespace detail {
template <class A, class = void>
struct allocate_is_const : std::false_type {};
template <class A>
struct allocate_is_const<A, std::void_t<decltype(std::declval<const A &>().allocate(std::size_t{0}))>>
    : std::true_type {};
template <class A, class = void>
struct has_copy_data : std::false_type {};
template <class A>
struct has_copy_data<A, std::void_t<decltype(std::declval<const A &>().copy_data(
                            static_cast<void *>(nullptr), static_cast<const void *>(nullptr), std::size_t{0}))>>
    : std::true_type {};

// The shapes seen so far; another one fails to compile here (an incomplete base).
template <class A, bool kConstAllocate, bool kCopyData>
struct AllocatorShape;
template <class A>
struct AllocatorShape<A, true, false> : A {
  c10::DataPtr allocate(std::size_t n) const override { return allocate_block(n); }
  virtual c10::DataPtr allocate_block(std::size_t n) const = 0;
};
template <class A>
struct AllocatorShape<A, false, true> : A {
  c10::DataPtr allocate(std::size_t n) override { return allocate_block(n); }
  void copy_data(void *dest, const void *src, std::size_t n) const override { this->default_copy_data(dest, src, n); }
  virtual c10::DataPtr allocate_block(std::size_t n) const = 0;
};
}  // namespace detail

using Allocator = detail::AllocatorShape<c10::Allocator, detail::allocate_is_const<c10::Allocator>::value,
                                         detail::has_copy_data<c10::Allocator>::value>;
}  // namespace ldt

namespace ldt {
// c10d::TCPStoreOptions::useLibUV: absent in 1.13; in later versions the store's server may run
// on libuv, the default from 2.4 on, and a libtorch built without libuv (Debian's 2.6) then
// refuses to host a store. store_off_libuv(options, 0) turns it off where the field exists and
// returns whether it was on (the int/long overloads pick the first where it compiles).
template <class Options>
auto store_off_libuv(Options &o, int) -> decltype(o.useLibUV = false, bool()) {
  const bool was = o.useLibUV;
  o.useLibUV = false;
  return was;
}
template <class Options>
bool store_off_libuv(Options &, long) {
  return false;
}
}  // namespace ldt
