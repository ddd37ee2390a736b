// dist.cc: collective communication over PyTorch's c10d: a Gloo process group that meets
// its peers through a c10d TCPStore (hosted by rank 0, or by an existing store such as
// torchrun's agent), with all-reduce (sum), broadcast, barrier and a few store operations
// for failure notes. Built with LDT_WITH_GLOO only (CMake sets it when the libtorch in use
// ships c10d and the Gloo headers are found); otherwise every call reports that.
//
// Every exported function runs inside the exception barrier: a peer that dies surfaces as a
// c10::Error ("Connection reset by peer", "Connection closed by peer") and a hung one as a
// Gloo timeout, both returned as errors. Setup errors (an unreachable store, a rendezvous
// that times out) are thrown by constructors and caught the same way.
//
// libtorch versions: in 1.13 ProcessGroupGloo derives from c10d::ProcessGroup, in 2.x from
// c10d::Backend; this file only uses ProcessGroupGloo's own members, whose signatures are
// the same in both (checked against the 1.13 headers only). TCPStore is built from
// TCPStoreOptions, which 1.13 already has and 2.x requires.
#include "internal.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#ifdef LDT_WITH_GLOO
#ifndef USE_C10D_GLOO  // ProcessGroupGloo.hpp is empty without it; Debian's TorchConfig sets it
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if LDT_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#endif

#ifdef LDT_WITH_GLOO
namespace {
#if LDT_TORCH_AT_LEAST(2, 0)
using GlooBase = c10d::Backend;
#else
using GlooBase = c10d::ProcessGroup;
#endif
static_assert(std::is_base_of<GlooBase, c10d::ProcessGroupGloo>::value,
              "ProcessGroupGloo's base class changed: review dist.cc for this libtorch");
}  // namespace

struct ldt_process_group_s {
  c10::intrusive_ptr<c10d::Store> store;  // the TCPStore, under a prefix
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  int rank = 0;
  int size = 0;
  std::chrono::microseconds spin{0};  // how long a collective's caller polls before it sleeps
};
// A collective started and not yet waited for (ldt_dist_all_reduce_sum_start).
struct ldt_work_s {
  c10::intrusive_ptr<c10d::Work> work;
};
#else
struct ldt_process_group_s {};
struct ldt_work_s {};
#endif

namespace {
#ifndef LDT_WITH_GLOO
[[noreturn]] void no_gloo() {
  throw std::runtime_error(
      "this shim was built without c10d/Gloo (install libgloo-dev and rebuild: cmake -S . -B build && "
      "cmake --build build)");
}
#endif

#ifdef LDT_WITH_GLOO
ldt_process_group_s &PG(ldt_process_group pg) {
  if (pg == nullptr) throw std::invalid_argument("null process group (destroyed or never created)");
  if (!pg->gloo) throw std::invalid_argument("process group was closed");
  return *pg;
}

ldt_process_group_s &SG(ldt_process_group pg) {
  if (pg == nullptr) throw std::invalid_argument("null process group (destroyed or never created)");
  if (!pg->store) throw std::invalid_argument("process group was closed");
  return *pg;
}

// Waits for one collective; Gloo's own timeout (set at init) bounds it. The caller first
// polls for up to pg.spin, yielding its core between polls, and only then sleeps: a sleeping
// caller is woken through Gloo's threads (socket loop, worker, then the caller), and on a
// virtual machine an idle core is slow to wake (torch/dist.DefaultSpinWait).
void run(const ldt_process_group_s &pg, const c10::intrusive_ptr<c10d::Work> &work) {
  if (pg.spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + pg.spin;
    while (!work->isCompleted() && std::chrono::steady_clock::now() < until) sched_yield();
  }
  work->wait();
}
#endif
}  // namespace

extern "C" {

int ldt_dist_available(void) {
#ifdef LDT_WITH_GLOO
  return 1;
#else
  return 0;
#endif
}

#ifdef LDT_WITH_GLOO
// check_world_size makes every rank agree with rank 0 on the group's size before Gloo's
// rendezvous, where a rank started with another WORLD_SIZE fails on an internal size check
// ("sizeof(impl_) == bytes.size(). 136 vs 68"). Rank 0 publishes its size in the store; the
// others read it (the store's get waits for it, up to the timeout).
static void check_world_size(c10d::Store &store, int rank, int world_size, const std::string &where) {
  static const std::string key = "ldtorch/world_size";
  const std::string mine = std::to_string(world_size);
  if (rank == 0) {
    store.set(key, std::vector<uint8_t>(mine.begin(), mine.end()));
    return;
  }
  const std::vector<uint8_t> v = store.get(key);
  const std::string theirs(v.begin(), v.end());
  if (theirs != mine)
    throw std::invalid_argument("this rank has WORLD_SIZE=" + mine + ", but rank 0 (store " + where + ") runs a group of " +
                                theirs + ": start every rank with the group's WORLD_SIZE");
}
#endif

ldt_error ldt_dist_init(ldt_process_group *out, const char *addr, int port, int rank, int world_size,
                        int client_only, const char *prefix, const char *iface, const char *bind_host,
                        int64_t timeout_ms, int64_t spin_us) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    *out = nullptr;
#ifdef LDT_WITH_GLOO
    if (addr == nullptr || *addr == '\0') throw std::invalid_argument("empty store address");
    if (port < 1 || port > 65535) throw std::invalid_argument("store port must be in 1..65535, got " + std::to_string(port));
    if (world_size < 1) throw std::invalid_argument("world size must be at least 1, got " + std::to_string(world_size));
    if (rank < 0 || rank >= world_size)
      throw std::invalid_argument("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1));
    if (timeout_ms <= 0) throw std::invalid_argument("timeout must be positive");
    if (spin_us < 0) throw std::invalid_argument("spin time must not be negative, got " + std::to_string(spin_us) + " us");
    const std::chrono::milliseconds timeout(timeout_ms);

    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(port);
    so.isServer = client_only == 0 && rank == 0;
    so.numWorkers = static_cast<std::size_t>(world_size);
    so.waitWorkers = client_only == 0;
    so.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> store;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(std::string(addr), so);
    } catch (const std::exception &e) {
      // A libtorch without libuv that defaults to it (compat.h) refuses the store, as server
      // and as client: every rank of such a build uses the classic store instead.
      if (std::string(e.what()).find("libuv") == std::string::npos || !ldt::store_off_libuv(so, 0)) throw;
      store = c10::make_intrusive<c10d::TCPStore>(std::string(addr), so);
    }
    if (prefix != nullptr && *prefix != '\0') store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
    check_world_size(*store, rank, world_size, std::string(addr) + ":" + std::to_string(port));

    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    if (iface != nullptr && *iface != '\0')
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
    else if (bind_host != nullptr && *bind_host != '\0')
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind_host));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;  // one collective at a time: the meta-loop waits on each
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, opts);

    auto pg = std::make_unique<ldt_process_group_s>();
    pg->store = store;
    pg->gloo = gloo;
    pg->rank = rank;
    pg->size = world_size;
    pg->spin = std::chrono::microseconds(spin_us);
    *out = pg.release();
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_all_reduce_sum(ldt_process_group pg, const ldt_tensor *ts, int n) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = PG(pg);
    std::vector<at::Tensor> v = ldt::list(ts, n);
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    for (auto &t : v) {  // one tensor per collective: Gloo's CPU all-reduce takes one per process
      std::vector<at::Tensor> one{t};
      run(g, g.gloo->allreduce(one, o));
    }
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_all_reduce_sum_start(ldt_process_group pg, ldt_tensor t, ldt_work *out) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    if (out == nullptr) throw std::invalid_argument("null output");
    *out = nullptr;
    auto &g = PG(pg);
    std::vector<at::Tensor> one{ldt::T(t)};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    auto w = std::make_unique<ldt_work_s>();
    w->work = g.gloo->allreduce(one, o);
    *out = w.release();
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_work_wait(ldt_process_group pg, ldt_work w) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    if (w == nullptr) return nullptr;
    std::unique_ptr<ldt_work_s> own(w);  // freed however the wait ends
    if (pg == nullptr) throw std::invalid_argument("null process group (destroyed or never created)");
    run(*pg, own->work);
#else
    (void)pg;
    (void)w;
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_broadcast(ldt_process_group pg, const ldt_tensor *ts, int n, int root) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = PG(pg);
    if (root < 0 || root >= g.size)
      throw std::invalid_argument("broadcast root " + std::to_string(root) + " is outside 0.." +
                                  std::to_string(g.size - 1));
    std::vector<at::Tensor> v = ldt::list(ts, n);
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.rootTensor = 0;
    for (auto &t : v) {
      std::vector<at::Tensor> one{t};
      run(g, g.gloo->broadcast(one, o));
    }
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_barrier(ldt_process_group pg) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = PG(pg);
    run(g, g.gloo->barrier(c10d::BarrierOptions()));
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_store_set(ldt_process_group pg, const char *key, const uint8_t *value, int64_t n) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = SG(pg);
    if (key == nullptr) throw std::invalid_argument("null key");
    if (n < 0 || (n > 0 && value == nullptr)) throw std::invalid_argument("bad value buffer");
    g.store->set(key, std::vector<uint8_t>(value, value + n));
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_dist_store_check(ldt_process_group pg, const char *key, int *found) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = SG(pg);
    if (key == nullptr || found == nullptr) throw std::invalid_argument("null key or output");
    *found = g.store->check({std::string(key)}) ? 1 : 0;
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

// Copies at most cap bytes of the value into buf and its full length into *n. Blocks until
// the key exists or the store's timeout passes.
ldt_error ldt_dist_store_get(ldt_process_group pg, const char *key, uint8_t *buf, int64_t cap, int64_t *n) {
  LDT_TRY {
#ifdef LDT_WITH_GLOO
    auto &g = SG(pg);
    if (key == nullptr || n == nullptr) throw std::invalid_argument("null key or output");
    if (cap < 0 || (cap > 0 && buf == nullptr)) throw std::invalid_argument("bad value buffer");
    std::vector<uint8_t> v = g.store->get(key);
    *n = static_cast<int64_t>(v.size());
    size_t k = std::min<size_t>(v.size(), static_cast<size_t>(cap));
    if (k > 0) std::memcpy(buf, v.data(), k);
#else
    no_gloo();
#endif
  }
  LDT_CATCH
}

// Closes the Gloo group (its peers' pending and later collectives fail at once) but keeps
// the store, so that failure notes can still be exchanged. Never fails.
void ldt_dist_close_collectives(ldt_process_group pg) {
  if (pg == nullptr) return;
#ifdef LDT_WITH_GLOO
  try {
    pg->gloo.reset();
  } catch (...) {
  }
#endif
}

// Never fails and is safe after any error: the Gloo group's destructor waits for its queue
// (each queued collective ends by completing, failing or timing out) and joins its thread;
// anything it throws is swallowed since the caller is tearing down anyway.
void ldt_dist_destroy(ldt_process_group pg) {
  if (pg == nullptr) return;
#ifdef LDT_WITH_GLOO
  try {
    pg->gloo.reset();
  } catch (...) {
  }
  try {
    pg->store.reset();
  } catch (...) {
  }
#endif
  delete pg;
}

}  // extern "C"
