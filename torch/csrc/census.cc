// census.cc: counting libtorch's operator calls (ldt_op_census_*). On a GPU a meta-step of
// a small network is bound by the host's work per operator (dispatch and kernel launch),
// not by the device, so the number of operators per step is what to measure and cut. It can
// be taken on the CPU too, where it differs only where the CPU path does (the shim's own
// kernels; `_foreach_` ops as loops): docs/benchmarks/gpu.md#operator-census-the-hosts-work-per-step.
//
// A global RecordFunction callback sees every dispatched operator (scope FUNCTION) and every
// autograd node the backward engine runs (BACKWARD_FUNCTION), on any thread: CUDA's backward
// runs on a device thread of its own. A call is "top" when no counted call encloses it on its
// thread (what the program itself, or the engine, asked for) and a "leaf" when it encloses
// none (an operator that did its work itself: on a GPU, at most one kernel launch, or none for
// a view or an empty tensor).

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "internal.h"

namespace {

struct Counts {
  int64_t calls = 0, top = 0, leaf = 0;
};

std::mutex census_mu;  // guards census_on, census_handle and census
bool census_on = false;
at::CallbackHandle census_handle = 0;
std::unordered_map<std::string, Counts> census;
std::atomic<int64_t> census_number{0};  // which census is running: stale thread state is reset

// The enclosing counted calls of this thread, innermost last: whether each has had a child;
// they belong to census open_calls_of.
thread_local std::vector<bool> open_calls;
thread_local int64_t open_calls_of = -1;

std::unique_ptr<at::ObserverContext> census_enter(const at::RecordFunction &fn) {
  if (open_calls_of != census_number.load()) {
    open_calls.clear();  // left open when an earlier census ended inside a call
    open_calls_of = census_number.load();
  }
  const bool top = open_calls.empty();
  if (!top) open_calls.back() = true;
  open_calls.push_back(false);
  std::lock_guard<std::mutex> lock(census_mu);
  Counts &c = census[fn.name()];
  c.calls++;
  if (top) c.top++;
  return nullptr;
}

void census_exit(const at::RecordFunction &fn, at::ObserverContext *) {
  // A call that began before the census has no entry here (its exit is not seen either:
  // RecordFunction calls the exit only of callbacks that saw the entry).
  if (open_calls.empty() || open_calls_of != census_number.load()) return;
  const bool had_child = open_calls.back();
  open_calls.pop_back();
  if (had_child) return;
  std::lock_guard<std::mutex> lock(census_mu);
  census[fn.name()].leaf++;
}

}  // namespace

extern "C" {

ldt_error ldt_op_census_start(void) {
  LDT_TRY {
    std::lock_guard<std::mutex> lock(census_mu);
    if (census_on) throw std::runtime_error("an operator census is already running");
    census.clear();
    census_number++;
    census_handle = at::addGlobalCallback(at::RecordFunctionCallback(census_enter, census_exit)
                                              .needsInputs(false)
                                              .needsOutputs(false)
                                              .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    census_on = true;
  }
  LDT_CATCH
}

ldt_error ldt_op_census_stop(char **out) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null out-parameter");
    std::vector<std::pair<std::string, Counts>> rows;
    {
      std::lock_guard<std::mutex> lock(census_mu);
      if (!census_on) throw std::runtime_error("no operator census is running");
      census_on = false;
      rows.assign(census.begin(), census.end());
      census.clear();
    }
    // Outside the lock: removing waits for no callback, and one that runs meanwhile only
    // counts into the cleared table.
    at::removeCallback(census_handle);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.calls != b.second.calls ? a.second.calls > b.second.calls : a.first < b.first;
    });
    std::ostringstream s;
    for (const auto &r : rows)
      s << r.first << '\t' << r.second.calls << '\t' << r.second.top << '\t' << r.second.leaf << '\n';
    *out = strdup(s.str().c_str());
    if (*out == nullptr) throw std::bad_alloc();
  }
  LDT_CATCH
}

}  // extern "C"
