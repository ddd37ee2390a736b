// script.cc: TorchScript modules (torch.jit.save's files) loaded onto the CPU, their named
// parameters and buffers with the types of the submodules that own them, and a functional
// call: a method run with given tensors in place of the module's own parameters and buffers
// (set into the submodules' attribute slots for the call, then put back), so that θ′ =
// θ − α∇θ, a tensor with a graph, can run through the module and autograd reaches θ through
// every order of derivative that the module's ops have.
//
// Methods run in TorchScript's interpreter with the graph executor's optimisations off for
// the call (GraphOptimizerEnabledGuard, thread-local): no profiling runs, no fused or
// autodiff subgraphs, whose backward graphs are not differentiable again; each op records
// its eager autograd node, as in a Python forward.
#include <ATen/ATen.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "internal.h"

namespace {

// A slot of an object: where one parameter or buffer of a (sub)module lives.
struct Slot {
  c10::intrusive_ptr<c10::ivalue::Object> obj;
  size_t index;
};

}  // namespace

struct ldt_script_s {
  torch::jit::Module mod;
  std::unordered_map<std::string, Slot> slots;  // name ("a.b.weight") → its slot, once looked up
};

namespace {

// BufferAdapter reads the file's bytes from memory, never past their end.
class BufferAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  BufferAdapter(const void *data, size_t size) : data_(static_cast<const char *>(data)), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void *buf, size_t n, const char *what = "") const override {
    (void)what;
    if (pos >= size_) return 0;
    const size_t k = std::min<size_t>(n, size_ - static_cast<size_t>(pos));
    std::memcpy(buf, data_ + pos, k);
    return k;
  }

 private:
  const char *data_;
  size_t size_;
};

ldt_script_s &S(ldt_script m) {
  if (m == nullptr) throw std::invalid_argument("null TorchScript module handle");
  return *m;
}

std::string type_name(const torch::jit::Module &m) {
  auto n = m.type()->name();
  return n ? n->qualifiedName() : std::string();
}

// submodule returns the submodule at path ("" the module itself, "a.b" nested).
torch::jit::Module submodule(const torch::jit::Module &root, const std::string &path) {
  torch::jit::Module m = root;
  size_t start = 0;
  while (start < path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    const std::string part = path.substr(start, dot - start);
    bool found = false;
    for (const auto &c : m.named_children()) {
      if (c.name == part) {
        m = c.value;
        found = true;
        break;
      }
    }
    if (!found) throw std::invalid_argument("no submodule \"" + path + "\"");
    start = dot + 1;
  }
  return m;
}

// Entry is one named parameter or buffer with the type of the module that holds it.
struct Entry {
  std::string name, owner;
  at::Tensor t;
};

// collect lists the module's own parameters (or buffers) and then its children's, in
// registration order: the order and names of Python's named_parameters and state_dict.
void collect(const torch::jit::Module &m, const std::string &prefix, bool buffers, std::vector<Entry> &out) {
  const std::string owner = type_name(m);
  if (buffers) {
    for (const auto &b : m.named_buffers(/*recurse=*/false)) out.push_back({prefix + b.name, owner, b.value});
  } else {
    for (const auto &p : m.named_parameters(/*recurse=*/false)) out.push_back({prefix + p.name, owner, p.value});
  }
  for (const auto &c : m.named_children()) collect(c.value, prefix + c.name + ".", buffers, out);
}

// slot finds (once) the attribute slot of the parameter or buffer name, which must hold a
// tensor.
Slot &slot(ldt_script_s &s, const std::string &name) {
  auto it = s.slots.find(name);
  if (it != s.slots.end()) return it->second;
  const size_t dot = name.rfind('.');
  const std::string attr = dot == std::string::npos ? name : name.substr(dot + 1);
  torch::jit::Module owner = s.mod;
  if (dot != std::string::npos) {
    try {
      owner = submodule(s.mod, name.substr(0, dot));
    } catch (const std::invalid_argument &e) {
      throw std::invalid_argument("the module has no parameter or buffer \"" + name + "\" (" + e.what() + ")");
    }
  }
  auto obj = owner._ivalue();
  auto index = obj->type()->findAttributeSlot(attr);
  if (!index) throw std::invalid_argument("the module has no parameter or buffer \"" + name + "\"");
  if (!obj->getSlot(*index).isTensor())
    throw std::invalid_argument("\"" + name + "\" is not a tensor attribute of the module");
  return s.slots.emplace(name, Slot{obj, *index}).first->second;
}

// Swaps puts the module's own values back into the slots it changed, whatever happens.
class Swaps {
 public:
  void set(Slot &s, const at::Tensor &t) {
    done_.push_back({s, s.obj->getSlot(s.index)});
    s.obj->setSlot(s.index, t);
  }
  ~Swaps() {
    for (auto it = done_.rbegin(); it != done_.rend(); ++it) it->first.obj->setSlot(it->first.index, it->second);
  }

 private:
  std::vector<std::pair<Slot, c10::IValue>> done_;
};

char *join(const std::vector<std::string> &v) {
  size_t n = 0;
  for (const auto &s : v) n += s.size() + 1;
  char *out = static_cast<char *>(std::malloc(n == 0 ? 1 : n));
  if (out == nullptr) throw std::bad_alloc();
  char *q = out;
  for (const auto &s : v) {
    std::memcpy(q, s.c_str(), s.size() + 1);
    q += s.size() + 1;
  }
  return out;
}

}  // namespace

extern "C" {

ldt_error ldt_script_load(ldt_script *out, const void *data, int64_t len) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    if (data == nullptr || len <= 0) throw std::invalid_argument("empty file");
    auto rai = std::make_shared<BufferAdapter>(data, static_cast<size_t>(len));
    auto m = std::make_unique<ldt_script_s>();
    m->mod = torch::jit::load(std::move(rai), c10::Device(c10::kCPU));
    *out = m.release();
  }
  LDT_CATCH
}

void ldt_script_free(ldt_script m) { delete m; }

ldt_error ldt_script_named(ldt_script m, int buffers, int *n, char **names, char **owners, ldt_tensor **ts) {
  LDT_TRY {
    if (n == nullptr || names == nullptr || owners == nullptr || ts == nullptr)
      throw std::invalid_argument("null output pointer");
    std::vector<Entry> e;
    collect(S(m).mod, "", buffers != 0, e);
    if (!buffers) {
      std::unordered_map<const void *, std::string> seen;
      for (const auto &p : e) {
        auto [it, fresh] = seen.emplace(p.t.unsafeGetTensorImpl(), p.name);
        if (!fresh)
          throw std::invalid_argument("parameters \"" + it->second + "\" and \"" + p.name +
                                      "\" are one tensor (tied weights), which a call cannot replace one by one");
      }
    }
    std::vector<std::string> nm, ow;
    for (const auto &p : e) {
      nm.push_back(p.name);
      ow.push_back(p.owner);
    }
    char *cn = join(nm);
    char *co = nullptr;
    try {
      co = join(ow);
    } catch (...) {
      std::free(cn);
      throw;
    }
    auto *hs = static_cast<ldt_tensor *>(std::malloc(sizeof(ldt_tensor) * (e.empty() ? 1 : e.size())));
    if (hs == nullptr) {
      std::free(cn);
      std::free(co);
      throw std::bad_alloc();
    }
    for (size_t i = 0; i < e.size(); i++) hs[i] = ldt::H(e[i].t);
    *n = static_cast<int>(e.size());
    *names = cn;
    *owners = co;
    *ts = hs;
  }
  LDT_CATCH
}

ldt_error ldt_script_module_type(ldt_script m, const char *path, char **type) {
  LDT_TRY {
    if (path == nullptr || type == nullptr) throw std::invalid_argument("null argument");
    *type = join({type_name(submodule(S(m).mod, path))});
  }
  LDT_CATCH
}

ldt_error ldt_script_has_method(ldt_script m, const char *name, int *found) {
  LDT_TRY {
    if (name == nullptr || found == nullptr) throw std::invalid_argument("null argument");
    *found = S(m).mod.find_method(name).has_value() ? 1 : 0;
  }
  LDT_CATCH
}

ldt_error ldt_script_train(ldt_script m, int on) {
  LDT_TRY { S(m).mod.train(on != 0); }
  LDT_CATCH
}

ldt_error ldt_script_to(ldt_script m, int dtype, int dev_type, int dev_index) {
  LDT_TRY {
    auto &s = S(m);
    const auto dt = ldt::dtype(dtype);
    const auto dev = ldt::device(dev_type, dev_index);
    if (!at::isFloatingType(dt)) throw std::invalid_argument("a module's floating-point tensors go to a floating-point dtype");
    at::NoGradGuard no_grad;
    std::vector<Entry> e;
    collect(s.mod, "", false, e);
    collect(s.mod, "", true, e);
    for (auto &p : e) {
      const auto want = at::isFloatingType(p.t.scalar_type()) ? dt : p.t.scalar_type();
      if (p.t.scalar_type() != want || p.t.device() != dev) p.t.set_data(p.t.to(dev, want));
    }
  }
  LDT_CATCH
}

ldt_error ldt_script_use_own_kernels(ldt_script m, const char *method, int *replaced) {
  LDT_TRY {
    if (method == nullptr || replaced == nullptr) throw std::invalid_argument("null argument");
    auto fn = S(m).mod.find_method(method);
    if (!fn) throw std::invalid_argument(std::string("the module has no method ") + method);
    *replaced = ldt::rewrite_own_kernels(torch::jit::toGraphFunction(fn->function()).graph());
  }
  LDT_CATCH
}

ldt_error ldt_script_call(ldt_tensor *out, ldt_script m, const char *method, const char *names,
                          const int64_t *name_lens, const ldt_tensor *ts, int n, ldt_tensor x) {
  LDT_TRY {
    auto &s = S(m);
    if (method == nullptr) throw std::invalid_argument("null method name");
    if (n < 0 || (n > 0 && (names == nullptr || name_lens == nullptr || ts == nullptr)))
      throw std::invalid_argument("bad replacement list");
    auto fn = s.mod.find_method(method);
    if (!fn) throw std::invalid_argument(std::string("the module has no method ") + method);
    const at::Tensor &in = ldt::T(x);
    Swaps swaps;
    const char *q = names;
    for (int i = 0; i < n; i++) {
      if (name_lens[i] <= 0) throw std::invalid_argument("empty name");
      const std::string name(q, static_cast<size_t>(name_lens[i]));
      q += name_lens[i];
      swaps.set(slot(s, name), ldt::T(ts[i]));
    }
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    c10::IValue r = (*fn)({in});
    if (!r.isTensor())
      throw std::invalid_argument(std::string("method ") + method + " returned " + r.tagKind() +
                                  ", not one tensor");
    ldt::set_out(out, r.toTensor());
  }
  LDT_CATCH
}

}  // extern "C"
