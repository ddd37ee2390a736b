// aten.cc: tensors handed to and taken from other bindings of the same libtorch in the
// process, as heap at::Tensor pointers (the convention of gotorch's `Tensor` and similar cgo
// bindings), and the checks that can be made on such a pointer.
#include <c10/core/UndefinedTensorImpl.h>

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "internal.h"

namespace {

// realpath of a file name, or the name itself when it cannot be resolved.
std::string real(const char *name) {
  if (name == nullptr || *name == '\0') return std::string();
  char buf[PATH_MAX];
  if (::realpath(name, buf) != nullptr) return std::string(buf);
  return std::string(name);
}

std::string dir_of(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// The first word of a polymorphic object is its vtable pointer (Itanium C++ ABI, which GCC
// and Clang follow on Linux); TensorImpl and its subclasses are polymorphic.
const void *vptr(const c10::TensorImpl *impl) { return *reinterpret_cast<const void *const *>(impl); }

// The loaded file that holds address a ("" when no loaded object holds it: heap, stack).
std::string object_of(const void *a) {
  Dl_info info;
  if (dladdr(a, &info) == 0 || info.dli_fname == nullptr) return std::string();
  if (info.dli_fname[0] == '\0') return real("/proc/self/exe");  // the main program
  return real(info.dli_fname);
}

// Whether a file is one of libtorch's libraries, by name: libc10*, libtorch* (libc10.so,
// libc10_cuda.so, libtorch_cpu.so, libtorch_cuda.so, with or without version suffixes).
bool is_libtorch_file(const std::string &path) {
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  return base.rfind("libc10", 0) == 0 || base.rfind("libtorch", 0) == 0;
}

// The folder of the libtorch this shim runs against: where libc10 (which holds
// UndefinedTensorImpl's vtable) was loaded from. Computed once.
const std::string &libtorch_dir() {
  static const std::string dir = dir_of(object_of(vptr(c10::UndefinedTensorImpl::singleton())));
  return dir;
}

int collect_c10(struct dl_phdr_info *info, size_t, void *data) {
  const char *name = info->dlpi_name;
  if (name == nullptr || *name == '\0') return 0;
  const char *base = std::strrchr(name, '/');
  base = base == nullptr ? name : base + 1;
  if (std::strncmp(base, "libc10.so", 9) != 0) return 0;
  auto *found = static_cast<std::vector<std::string> *>(data);
  std::string path = real(name);
  for (const auto &f : *found)
    if (f == path) return 0;
  found->push_back(path);
  return 0;
}

// Refuses a process with two copies of libc10 loaded (two libtorch installations): a tensor
// of one cannot be used by the other. A copy linked statically into some other object
// cannot be seen here.
void check_one_libtorch() {
  std::vector<std::string> found;
  dl_iterate_phdr(collect_c10, &found);
  if (found.size() > 1) {
    std::string msg = "two copies of libtorch are loaded in this process (";
    for (size_t i = 0; i < found.size(); i++) msg += (i ? ", " : "") + found[i];
    msg += "): tensors cannot cross between them";
    throw std::invalid_argument(msg);
  }
}

}  // namespace

extern "C" {

const char *ldt_libtorch_dir(void) {
  try {
    return libtorch_dir().c_str();
  } catch (...) {
    return "";
  }
}

ldt_error ldt_aten_from(ldt_tensor *out, const void *p) {
  LDT_TRY {
    if (p == nullptr) throw std::invalid_argument("null at::Tensor pointer");
    if (reinterpret_cast<uintptr_t>(p) % alignof(at::Tensor) != 0)
      throw std::invalid_argument("not an at::Tensor pointer (misaligned)");
    check_one_libtorch();
    const auto &src = *static_cast<const at::Tensor *>(p);
    const c10::TensorImpl *impl = src.unsafeGetTensorImpl();
    if (impl == nullptr) throw std::invalid_argument("not an at::Tensor (null TensorImpl)");
    if (reinterpret_cast<uintptr_t>(impl) % alignof(c10::TensorImpl) != 0)
      throw std::invalid_argument("not an at::Tensor (misaligned TensorImpl)");
    // A TensorImpl's vtable lives in one of libtorch's libraries (libc10, libtorch_cpu,
    // libtorch_cuda, …): one in no loaded file, in another file or in another folder is not a
    // tensor of this libtorch.
    std::string where = object_of(vptr(impl));
    if (where.empty())
      throw std::invalid_argument("not an at::Tensor (its TensorImpl has no vtable in any loaded library)");
    if (!is_libtorch_file(where) || dir_of(where) != libtorch_dir())
      throw std::invalid_argument("not an at::Tensor of this binding's libtorch (its TensorImpl type is defined in " +
                                  where + "; this binding uses the libtorch in " + libtorch_dir() + ")");
    if (!src.defined()) throw std::invalid_argument("undefined at::Tensor");
    if (src.layout() != at::kStrided) {
      std::ostringstream msg;
      msg << "only dense (strided) tensors can be shared, got layout " << src.layout();
      throw std::invalid_argument(msg.str());
    }
    if (!src.device().is_cpu() && !src.device().is_cuda())
      throw std::invalid_argument("only CPU and CUDA tensors can be shared, got device " + src.device().str());
    ldt::set_out(out, src);  // a new reference to the same TensorImpl: no copy
  }
  LDT_CATCH
}

ldt_error ldt_aten_to(void **out, ldt_tensor t) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    const at::Tensor &src = ldt::T(t);
    if (!src.defined()) throw std::invalid_argument("undefined tensor");
    check_one_libtorch();
    *out = new at::Tensor(src);
  }
  LDT_CATCH
}

}  // extern "C"
