// script_kernels.cc: TorchScript methods onto the shim's own kernels. The operators
// ldtorch::conv2d, ldtorch::max_pool2d and ldtorch::conv2d_max_pool2d (registered on first
// use, never at load) run kernels/kernels.h's direct convolution, max-pools and fused
// convolution with max-pool, each falling back to ATen's op where the kernels do not apply
// (other devices, dtypes, shapes; SetDirectConv("off")). rewrite_own_kernels inlines a
// method's graph (its calls of submodules' and its own methods) and replaces
//   aten::max_pool2d(aten::conv2d(x))             → ldtorch::conv2d_max_pool2d(x)
//   aten::max_pool2d(aten::relu(aten::conv2d(x))) → aten::relu(ldtorch::conv2d_max_pool2d(x))
// (exact: ReLU is monotonic, so it commutes with the max, values and gradients alike; the
// intermediate results must have no other use), then every other aten::conv2d and
// aten::max_pool2d. Values are within float rounding of ATen's (the convolutions add in
// another order); derivatives of every order are the kernels' own.
#include <ATen/ATen.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/library.h>

#include <memory>
#include <vector>

#include "internal.h"
#include "kernels/kernels.h"

namespace {

// pair2 is a list of one or two ints as (h, w); an empty one is dflt.
std::vector<int64_t> pair2(at::IntArrayRef v, at::IntArrayRef dflt) {
  if (v.empty()) v = dflt;
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() != 2) throw std::invalid_argument("expected one or two sizes, got " + std::to_string(v.size()));
  return {v[0], v[1]};
}

at::Tensor bias_of(const ldt::optional<at::Tensor> &b) { return b ? *b : at::Tensor(); }

at::Tensor conv2d_op(const at::Tensor &x, const at::Tensor &w, const ldt::optional<at::Tensor> &b, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const auto st = pair2(stride, {1}), pad = pair2(padding, {0}), dil = pair2(dilation, {1});
  return ldt::kernels::conv2d_direct(x, w, bias_of(b), st, pad, dil, groups);
}

bool is_2x2(at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, bool ceil) {
  return k[0] == 2 && k[1] == 2 && s[0] == 2 && s[1] == 2 && p[0] == 0 && p[1] == 0 && d[0] == 1 && d[1] == 1 && !ceil;
}

at::Tensor max_pool2d_op(const at::Tensor &x, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                         at::IntArrayRef dilation, bool ceil) {
  const auto k = pair2(kernel, {}), s = pair2(stride, kernel), p = pair2(padding, {0}), d = pair2(dilation, {1});
  if (d[0] != 1 || d[1] != 1) return at::max_pool2d(x, k, s, p, d, ceil);
  if (is_2x2(k, s, p, d, ceil)) return ldt::kernels::max_pool2x2(x);
  return ldt::kernels::max_pool2d_direct(x, k, s, p, ceil);
}

at::Tensor conv2d_max_pool2d_op(const at::Tensor &x, const at::Tensor &w, const ldt::optional<at::Tensor> &b,
                                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                at::IntArrayRef kernel, at::IntArrayRef pool_stride, at::IntArrayRef pool_padding,
                                at::IntArrayRef pool_dilation, bool ceil) {
  const auto st = pair2(stride, {1}), pad = pair2(padding, {0}), dil = pair2(dilation, {1});
  const auto k = pair2(kernel, {}), s = pair2(pool_stride, kernel), p = pair2(pool_padding, {0}),
             d = pair2(pool_dilation, {1});
  const at::Tensor bt = bias_of(b);
  if (d[0] != 1 || d[1] != 1) return at::max_pool2d(ldt::kernels::conv2d_direct(x, w, bt, st, pad, dil, groups), k, s, p, d, ceil);
  if (is_2x2(k, s, p, d, ceil)) return ldt::kernels::conv2d_max_pool2x2(x, w, bt, st, pad, dil, groups);
  return ldt::kernels::conv2d_max_pool2d(x, w, bt, st, pad, dil, groups, k, s, p, ceil);
}

constexpr const char *kConv = "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                              "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor";
constexpr const char *kPool = "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                              "int[2] dilation=1, bool ceil_mode=False) -> Tensor";
constexpr const char *kRelu = "aten::relu(Tensor self) -> Tensor";

// register_ops makes the ldtorch:: operators known to the dispatcher and TorchScript, once.
void register_ops() {
  static const std::unique_ptr<torch::Library> lib = [] {
    auto l = std::make_unique<torch::Library>(torch::Library::DEF, "ldtorch", ldt::nullopt, __FILE__, __LINE__);
    l->def("conv2d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
           "int groups) -> Tensor",
           &conv2d_op);
    l->def("max_pool2d(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
           "bool ceil_mode) -> Tensor",
           &max_pool2d_op);
    l->def("conv2d_max_pool2d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
           "int[] dilation, int groups, int[] kernel_size, int[] pool_stride, int[] pool_padding, "
           "int[] pool_dilation, bool ceil_mode) -> Tensor",
           &conv2d_max_pool2d_op);
    return l;
  }();
  (void)lib;
}

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// single_use says whether v's one use is by node n.
bool single_use(const Value *v, const Node *n) { return v->uses().size() == 1 && v->uses()[0].user == n; }

// replace puts a node of kind kind with inputs before old and makes it produce old's output.
Node *replace(Graph &g, Node *old, const char *kind, const std::vector<Value *> &inputs) {
  torch::jit::WithInsertPoint guard(old);
  Node *n = g.insertNode(g.create(c10::Symbol::fromQualString(kind), inputs, 1));
  n->output()->setType(old->output()->type());
  n->setSourceRange(old->sourceRange());
  return n;
}

void collect_blocks(torch::jit::Block *b, std::vector<Node *> &pools, std::vector<Node *> &convs) {
  for (Node *n : b->nodes()) {
    if (n->kind() == c10::Symbol::fromQualString("aten::max_pool2d") && n->matches(kPool)) pools.push_back(n);
    if (n->kind() == c10::Symbol::fromQualString("aten::conv2d") && n->matches(kConv)) convs.push_back(n);
    for (auto *sub : n->blocks()) collect_blocks(sub, pools, convs);
  }
}

}  // namespace

namespace ldt {

int rewrite_own_kernels(const std::shared_ptr<torch::jit::Graph> &g) {
  register_ops();
  torch::jit::Inline(*g);
  int count = 0;
  std::vector<Node *> pools, convs;
  collect_blocks(g->block(), pools, convs);
  std::vector<Node *> dead;
  for (Node *pool : pools) {
    Value *in = pool->input(0);
    Node *relu = nullptr, *conv = in->node();
    if (conv->kind() == c10::Symbol::fromQualString("aten::relu") && conv->matches(kRelu) && single_use(in, pool)) {
      relu = conv;
      in = relu->input(0);
      conv = in->node();
    }
    const bool fuse = conv->kind() == c10::Symbol::fromQualString("aten::conv2d") && conv->matches(kConv) &&
                      single_use(in, relu != nullptr ? relu : pool) && conv->owningBlock() == pool->owningBlock();
    if (!fuse) continue;
    std::vector<Value *> args(conv->inputs().begin(), conv->inputs().end());
    for (size_t i = 1; i < pool->inputs().size(); i++) args.push_back(pool->input(i));
    Node *fused = replace(*g, pool, "ldtorch::conv2d_max_pool2d", args);
    Value *out = fused->output();
    if (relu != nullptr) {
      torch::jit::WithInsertPoint guard(pool);
      Node *r = g->insertNode(g->create(c10::Symbol::fromQualString("aten::relu"), {out}, 1));
      r->output()->setType(pool->output()->type());
      out = r->output();
    }
    pool->output()->replaceAllUsesWith(out);
    dead.push_back(pool);
    if (relu != nullptr) dead.push_back(relu);
    dead.push_back(conv);
    count++;
  }
  for (Node *n : dead) n->destroy();
  pools.clear();
  convs.clear();
  collect_blocks(g->block(), pools, convs);
  for (Node *conv : convs) {
    Node *n = replace(*g, conv, "ldtorch::conv2d", std::vector<Value *>(conv->inputs().begin(), conv->inputs().end()));
    conv->output()->replaceAllUsesWith(n->output());
    conv->destroy();
    count++;
  }
  for (Node *pool : pools) {
    Node *n = replace(*g, pool, "ldtorch::max_pool2d", std::vector<Value *>(pool->inputs().begin(), pool->inputs().end()));
    pool->output()->replaceAllUsesWith(n->output());
    pool->destroy();
    count++;
  }
  g->lint();
  return count;
}

}  // namespace ldt
