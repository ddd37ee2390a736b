// alloc.cc: a cache of large CPU blocks. glibc serves every block above its mmap threshold
// (at most 32 MiB, however MALLOC_MMAP_THRESHOLD_ is set) with a fresh mmap and returns it to
// the kernel when it is freed, so each meta-step of a large model faults its activations in
// again, page by page: AlexCifarNet's 1024-image activations are 67–268 MB each, and the
// page faults were 20 % of an LD RR meta-step (docs/benchmarks/allocator.md#large-blocks-kept-for-reuse). Installed
// by a program (the ldtorch command does, with its malloc settings), never by loading the
// library: CPU blocks of 32 MiB and more are then mapped 2 MiB-aligned with transparent huge
// pages requested, and kept on free for the next request of (nearly) the same size, up to a
// limit; smaller blocks go to libtorch's allocator as before.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include "common.h"

namespace {

constexpr size_t kLarge = size_t(32) << 20;  // glibc's largest mmap threshold
constexpr size_t kHuge = size_t(2) << 20;    // a transparent huge page

struct Block {
  void *p;
  size_t size;
};

// ldt::Allocator (compat.h) is c10::Allocator in the shape of the libtorch compiled against.
class BlockCache final : public ldt::Allocator {
 public:
  explicit BlockCache(c10::Allocator *base) : base_(base) {}

  // allocate_block follows the allocator protocol of libtorch's raw_allocate (which oneDNN's
  // integration uses): the context is the data pointer, and raw_deleter frees by it alone.
  c10::DataPtr allocate_block(size_t n) const override {
    if (n < kLarge || limit_.load() == 0) return base_->allocate(n);
    const size_t want = (n + kHuge - 1) / kHuge * kHuge;
    Block b = take(want);
    if (b.p == nullptr) b = map(want);
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.emplace(b.p, b.size);
    }
    return {b.p, b.p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // set_limit sets how many bytes of freed blocks may be kept, unmapping what is over it.
  void set_limit(size_t bytes) {
    limit_.store(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    trim(bytes);
  }

  void stats(int64_t *cached, int64_t *maps, int64_t *hits) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached != nullptr) *cached = static_cast<int64_t>(cached_);
    if (maps != nullptr) *maps = maps_;
    if (hits != nullptr) *hits = hits_;
  }

  static std::atomic<BlockCache *> instance;

 private:
  // take returns a kept block of size want up to want + 25 %, the smallest such, or none.
  Block take(size_t want) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(want);
    if (it == free_.end() || it->first > want + want / 4) return {nullptr, 0};
    Block b{it->second, it->first};
    free_.erase(it);
    cached_ -= b.size;
    hits_++;
    return b;
  }

  // map maps a new block, 2 MiB-aligned, with huge pages requested (a hint: without them,
  // or with transparent huge pages off, it is an ordinary mapping).
  Block map(size_t size) const {
    void *raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        trim(0);  // give the kept blocks back and try once more
      }
      raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      TORCH_CHECK(raw != MAP_FAILED, "CPU block cache: out of memory mapping ", size, " bytes");
    }
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + size + kHuge;
    if (end > aligned + size) munmap(reinterpret_cast<void *>(aligned + size), end - (aligned + size));
    void *p = reinterpret_cast<void *>(aligned);
    (void)madvise(p, size, MADV_HUGEPAGE);
    std::lock_guard<std::mutex> lock(mu_);
    maps_++;
    return {p, size};
  }

  // release frees a block of this allocator, or hands one of the base allocator's back to it.
  static void release(void *p) {
    BlockCache *c = instance.load();
    size_t size = 0;
    bool kept = false;
    {
      std::lock_guard<std::mutex> lock(c->mu_);
      auto it = c->live_.find(p);
      if (it != c->live_.end()) {
        size = it->second;
        c->live_.erase(it);
        if (c->cached_ + size <= c->limit_.load()) {
          c->free_.emplace(size, p);
          c->cached_ += size;
          kept = true;
        }
      }
    }
    if (size == 0) {
      c->base_->raw_deleter()(p);
    } else if (!kept) {
      munmap(p, size);
    }
  }

  // trim unmaps kept blocks, largest first, until at most bytes are kept (mu_ held).
  void trim(size_t bytes) const {
    while (cached_ > bytes && !free_.empty()) {
      auto it = std::prev(free_.end());
      munmap(it->second, it->first);
      cached_ -= it->first;
      free_.erase(it);
    }
  }

  c10::Allocator *base_;
  std::atomic<size_t> limit_{0};
  mutable std::mutex mu_;
  mutable std::multimap<size_t, void *> free_;   // kept blocks by size
  mutable std::unordered_map<void *, size_t> live_;  // blocks handed out
  mutable size_t cached_ = 0;
  mutable int64_t maps_ = 0, hits_ = 0;
};

std::atomic<BlockCache *> BlockCache::instance{nullptr};
std::mutex install_mu;

}  // namespace

namespace ldt {
namespace kernels {

void set_cpu_block_cache(int64_t max_bytes) {
  if (max_bytes < 0) throw std::invalid_argument("CPU block cache: negative limit");
  std::lock_guard<std::mutex> lock(install_mu);
  BlockCache *c = BlockCache::instance.load();
  if (c == nullptr && max_bytes > 0) {
    // Never freed: the blocks it hands out call back into it until the process ends.
    c = new BlockCache(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(c, /*priority=*/1);
    BlockCache::instance.store(c);
  }
  if (c != nullptr) c->set_limit(static_cast<size_t>(max_bytes));
}

void cpu_block_cache_stats(int64_t *cached_bytes, int64_t *maps, int64_t *hits) {
  const BlockCache *c = BlockCache::instance.load();
  if (c == nullptr) {
    if (cached_bytes != nullptr) *cached_bytes = 0;
    if (maps != nullptr) *maps = 0;
    if (hits != nullptr) *hits = 0;
    return;
  }
  c->stats(cached_bytes, maps, hits);
}

}  // namespace kernels
}  // namespace ldt
