// pickle.cc: named tensors in libtorch's pickle format: the zip archive of torch.save
// ("archive/data.pkl" and one record per storage), holding a dict {str: Tensor} that Python's
// torch.load reads, and torch::pickle_load reads back.
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <memory>
#include <unordered_map>

#include <cstdlib>
#include <string>
#include <vector>

#include "internal.h"

namespace {

// What is saved for one tensor: detached, on the CPU, and holding exactly its own elements
// (the pickle stores a tensor's whole storage, so a view of a larger tensor is copied out).
at::Tensor compact_cpu(const at::Tensor &t) {
  at::Tensor x = t.detach();
  if (!x.device().is_cpu()) x = x.cpu();
  bool exact = x.is_contiguous() && x.storage_offset() == 0 &&
               x.storage().nbytes() == static_cast<size_t>(x.numel()) * x.element_size();
  return exact ? x : x.clone(at::MemoryFormat::Contiguous);
}

// torch::pickle_save's container (a PyTorchStreamWriter archive written by
// writeArchiveAndTensors), from a Pickler that does not tag aggregates: pickle_save wraps the
// dict in torch.jit._pickle.restore_type_tag(…, "Dict[str, Tensor]"), a global that
// torch.load(weights_only=True) refuses (the default from PyTorch 2.6 on). Untagged, the
// dict holds only what weights_only allows (tensor rebuilds, storages, OrderedDict).
std::vector<char> save_untagged(const at::IValue &value) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char *p, size_t n) { pickle.insert(pickle.end(), p, p + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void *p, size_t n) -> size_t {
    const char *c = static_cast<const char *>(p);
    out.insert(out.end(), c, c + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

// The bytes of a file, for PyTorchStreamReader.
class MemoryAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  MemoryAdapter(const char *data, size_t size) : data_(data), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void *buf, size_t n, const char *) const override {
    if (pos >= size_) return 0;
    n = std::min(n, static_cast<size_t>(size_ - pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char *data_;
  size_t size_;
};

// What torch::pickle_load does (the archive's data.pkl unpickled, storages read from its
// data/ records), onto the CPU whatever device the file names, keeping each record's length: a pickle states a storage's length apart
// from its record's, and libtorch's reader takes the stated one, so a damaged file could
// make a storage longer than the memory holding it. Refused here, as are tensors reaching
// past their storage (check_in_storage).
at::IValue load_checked(const char *data, size_t size) {
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MemoryAdapter>(data, size));
  at::DataPtr pickle;
  size_t pickle_size = 0;
  std::tie(pickle, pickle_size) = reader.getRecord("data.pkl");
  size_t pos = 0;
  auto read = [&](char *buf, size_t n) -> size_t {
    n = std::min(n, pickle_size - pos);
    if (n > 0) std::memcpy(buf, static_cast<const char *>(pickle.get()) + pos, n);
    pos += n;
    return n;
  };
  std::unordered_map<const void *, size_t> record_size;
  auto read_record = [&](const std::string &key) -> at::DataPtr {
    auto record = reader.getRecord("data/" + key);
    record_size[std::get<0>(record).get()] = std::get<1>(record);
    return std::move(std::get<0>(record));
  };
  torch::jit::Unpickler unpickler(read, /*type_resolver=*/nullptr, /*obj_loader=*/nullptr, read_record,
                                  /*device=*/at::Device(at::kCPU));
  unpickler.set_version(reader.version());
  at::IValue value = unpickler.parse_ivalue();
  if (value.isGenericDict()) {
    for (const auto &item : value.toGenericDict()) {
      if (!item.value().isTensor()) continue;
      const at::Tensor &t = item.value().toTensor();
      if (!t.defined() || !t.has_storage()) continue;
      auto it = record_size.find(t.storage().data());
      size_t have = it == record_size.end() ? 0 : it->second;
      if (t.storage().nbytes() > have)
        throw std::invalid_argument("a storage states " + std::to_string(t.storage().nbytes()) + " bytes, its record holds " +
                                    std::to_string(have) + " (corrupt file?)");
    }
  }
  return value;
}

// A pickle states each tensor's sizes, strides and offset apart from its storage's length,
// and libtorch's reader takes them as they are: a damaged file can describe a tensor that
// reaches past its storage (reading it would read outside the allocation). Refused here.
void check_in_storage(const std::string &name, const at::Tensor &t) {
  if (!t.defined() || t.layout() != at::kStrided || !t.has_storage())
    throw std::invalid_argument("tensor \"" + name + "\" is not a dense tensor with storage");
  if (t.numel() == 0) return;
  int64_t last = t.storage_offset();  // the highest element index the tensor reaches
  if (last < 0) throw std::invalid_argument("tensor \"" + name + "\" has a negative storage offset (corrupt file?)");
  for (int64_t d = 0; d < t.dim(); d++) {
    int64_t size = t.size(d), stride = t.stride(d);
    if (stride < 0) throw std::invalid_argument("tensor \"" + name + "\" has a negative stride (corrupt file?)");
    int64_t reach = 0;
    if (__builtin_mul_overflow(size - 1, stride, &reach) || __builtin_add_overflow(last, reach, &last))
      throw std::invalid_argument("tensor \"" + name + "\" has sizes and strides that overflow (corrupt file?)");
  }
  uint64_t need = (static_cast<uint64_t>(last) + 1) * static_cast<uint64_t>(t.element_size());
  if (need / t.element_size() != static_cast<uint64_t>(last) + 1 || need > t.storage().nbytes())
    throw std::invalid_argument("tensor \"" + name + "\" reaches past its storage (" + std::to_string(need) +
                                " bytes of " + std::to_string(t.storage().nbytes()) + "; corrupt file?)");
}

}  // namespace

extern "C" {

void ldt_free_buffer(void *p) { std::free(p); }

ldt_error ldt_pickle_save(const char *names, const int64_t *name_lens, const ldt_tensor *ts, int n, void **buf,
                          int64_t *len) {
  LDT_TRY {
    if (buf == nullptr || len == nullptr) throw std::invalid_argument("null output pointer");
    *buf = nullptr;
    *len = 0;
    auto tensors = ldt::list(ts, n);
    if (n > 0 && (names == nullptr || name_lens == nullptr)) throw std::invalid_argument("null name list");
    c10::Dict<std::string, at::Tensor> dict;
    const char *p = names;
    for (int i = 0; i < n; i++) {
      if (name_lens[i] <= 0) throw std::invalid_argument("tensor " + std::to_string(i) + ": empty name");
      std::string name(p, static_cast<size_t>(name_lens[i]));
      p += name_lens[i];
      if (name.find('\0') != std::string::npos)
        throw std::invalid_argument("tensor " + std::to_string(i) + ": name contains a NUL byte");
      if (dict.contains(name)) throw std::invalid_argument("duplicate name \"" + name + "\"");
      if (!tensors[i].defined()) throw std::invalid_argument("tensor \"" + name + "\" is undefined");
      dict.insert(name, compact_cpu(tensors[i]));
    }
    std::vector<char> bytes = save_untagged(c10::IValue(dict));
    void *out = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (out == nullptr) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    *buf = out;
    *len = static_cast<int64_t>(bytes.size());
  }
  LDT_CATCH
}

ldt_error ldt_pickle_load(const void *data, int64_t len, int *n, ldt_tensor **ts, char **names) {
  LDT_TRY {
    if (n == nullptr || ts == nullptr || names == nullptr) throw std::invalid_argument("null output pointer");
    *n = 0;
    *ts = nullptr;
    *names = nullptr;
    if (len < 0 || (len > 0 && data == nullptr)) throw std::invalid_argument("bad input buffer");
    at::IValue v = load_checked(static_cast<const char *>(data), static_cast<size_t>(len));
    if (!v.isGenericDict()) throw std::invalid_argument(std::string("not a dict of tensors: holds a ") + v.tagKind());
    std::vector<at::Tensor> tensors;
    std::string joined;  // names, each followed by a NUL
    for (const auto &item : v.toGenericDict()) {
      if (!item.key().isString())
        throw std::invalid_argument(std::string("not a dict of tensors: a key is a ") + item.key().tagKind());
      const std::string &name = item.key().toStringRef();
      if (!item.value().isTensor())
        throw std::invalid_argument("not a dict of tensors: \"" + name + "\" is a " + item.value().tagKind());
      if (name.empty() || name.find('\0') != std::string::npos)
        throw std::invalid_argument("a tensor name is empty or contains a NUL byte");
      check_in_storage(name, item.value().toTensor());
      tensors.push_back(item.value().toTensor());
      joined += name;
      joined.push_back('\0');
    }
    if (tensors.size() > static_cast<size_t>(INT32_MAX)) throw std::invalid_argument("too many tensors");
    char *nm = static_cast<char *>(std::malloc(joined.size() + 1));
    auto *hs = static_cast<ldt_tensor *>(std::malloc((tensors.size() + 1) * sizeof(ldt_tensor)));
    if (nm == nullptr || hs == nullptr) {
      std::free(nm);
      std::free(hs);
      throw std::bad_alloc();
    }
    std::memcpy(nm, joined.data(), joined.size());
    nm[joined.size()] = '\0';
    size_t made = 0;
    try {
      for (; made < tensors.size(); made++) hs[made] = ldt::H(std::move(tensors[made]));
    } catch (...) {
      for (size_t i = 0; i < made; i++) ldt_tensor_free(hs[i]);
      std::free(nm);
      std::free(hs);
      throw;
    }
    *n = static_cast<int>(tensors.size());
    *ts = hs;
    *names = nm;
  }
  LDT_CATCH
}

}  // extern "C"
