// graph.cc: CUDA graphs. A step of a small model on a GPU is bound by the host's work per
// operator (docs/benchmarks/gpu.md#operator-census-the-hosts-work-per-step); recorded once as a CUDA graph, every
// later step is one launch of all its kernels. Each graph owns a side stream: capture must
// not happen on the default stream, and the warm-up steps before it run on that same stream,
// so that what libtorch sets up lazily per stream (cuBLAS workspaces) exists before capture.
// A build without CUDA compiles the same entry points, each failing with a clear error.
#include "internal.h"

#ifdef LDT_WITH_CUDA
#include <ATen/Context.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>

struct ldt_graph_s {
  c10::DeviceIndex device;
  at::cuda::CUDAStream side;
  std::optional<at::cuda::CUDAStream> outer;  // the stream to return to while on side
  at::LinalgBackend outer_linalg = at::LinalgBackend::Default;
  at::cuda::CUDAGraph graph;
  bool captured = false;
};

namespace {
// A warning handler that drops what it is given: libtorch warns once when a linear-algebra
// backend is chosen, and the library does not print.
struct Quiet : c10::WarningHandler {
  void process(const c10::Warning &) override {}
};

void set_linalg(at::LinalgBackend b) {
  Quiet quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  at::globalContext().setLinalgPreferredBackend(b);
}

// enter makes g's side stream the current one after the work queued so far on the current
// stream; leave makes the current stream wait for the side stream's work and restores it.
// On the side stream linear algebra runs on cuSOLVER and cuBLAS: libtorch's default may
// pick MAGMA for one small matrix, whose factorisation works on the host (a capture fails).
void enter(ldt_graph g) {
  if (g->outer) throw std::logic_error("graph: already on its side stream");
  auto cur = at::cuda::getCurrentCUDAStream(g->device);
  at::cuda::CUDAEvent ev;
  ev.record(cur);
  ev.block(g->side);
  g->outer_linalg = at::globalContext().linalgPreferredBackend();
  set_linalg(at::LinalgBackend::Cusolver);
  g->outer = cur;
  at::cuda::setCurrentCUDAStream(g->side);
}

void leave(ldt_graph g) {
  if (!g->outer) return;
  at::cuda::CUDAEvent ev;
  ev.record(g->side);
  ev.block(*g->outer);
  at::cuda::setCurrentCUDAStream(*g->outer);
  g->outer.reset();
  set_linalg(g->outer_linalg);
}
}  // namespace
#else
struct ldt_graph_s {};
namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("CUDA graphs need a shim built with CUDA"); }
}  // namespace
#endif

extern "C" {

ldt_error ldt_graph_new(ldt_graph *out, int device_index) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
#ifdef LDT_WITH_CUDA
    auto dev = static_cast<c10::DeviceIndex>(device_index);
    c10::cuda::CUDAGuard guard(dev);
    *out = new ldt_graph_s{dev, at::cuda::getStreamFromPool(/*isHighPriority=*/false, dev)};
#else
    (void)device_index;
    no_cuda();
#endif
  }
  LDT_CATCH
}

void ldt_graph_free(ldt_graph g) {
#ifdef LDT_WITH_CUDA
  if (g == nullptr) return;
  try {
    leave(g);
  } catch (...) {
  }
#endif
  delete g;
}

ldt_error ldt_graph_enter(ldt_graph g) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null graph");
#ifdef LDT_WITH_CUDA
    enter(g);
#else
    no_cuda();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_graph_leave(ldt_graph g) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null graph");
#ifdef LDT_WITH_CUDA
    leave(g);
#else
    no_cuda();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_graph_capture_begin(ldt_graph g) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null graph");
#ifdef LDT_WITH_CUDA
    if (g->captured) throw std::logic_error("graph: already captured");
    if (!g->outer) throw std::logic_error("graph: capture happens on its side stream (enter first)");
    g->graph.capture_begin();
#else
    no_cuda();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_graph_capture_end(ldt_graph g) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null graph");
#ifdef LDT_WITH_CUDA
    g->graph.capture_end();
    g->captured = true;
#else
    no_cuda();
#endif
  }
  LDT_CATCH
}

ldt_error ldt_graph_replay(ldt_graph g) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null graph");
#ifdef LDT_WITH_CUDA
    if (!g->captured) throw std::logic_error("graph: nothing captured");
    if (g->outer) throw std::logic_error("graph: replay from its side stream");
    c10::cuda::CUDAGuard guard(g->device);
    g->graph.replay();
#else
    no_cuda();
#endif
  }
  LDT_CATCH
}

}  // extern "C"
