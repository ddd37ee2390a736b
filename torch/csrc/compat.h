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
