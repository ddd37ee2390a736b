// math.cc: pointwise arithmetic and comparisons, reductions, clamping, linear algebra and
// in-place updates, dispatched by small op codes so the C API stays short.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "internal.h"

namespace {

// Whether any of the n values at p is NaN or infinite: its exponent bits all ones, tested
// on the bits so that the loop has no branch and vectorises.
template <typename Float, typename Bits, Bits exponent>
bool any_nonfinite(const Float *p, int64_t n) {
  static_assert(sizeof(Float) == sizeof(Bits), "bit width");
  Bits hit = 0;
  for (int64_t i = 0; i < n; i++) {
    Bits b;
    std::memcpy(&b, p + i, sizeof b);
    hit |= static_cast<Bits>((b & exponent) == exponent);
  }
  return hit != 0;
}

// The probe of floating-point tensors on any device, as kernels: per dtype, the values
// flattened into one tensor, times 0 (0 for every finite value, NaN otherwise) and summed: a
// few kernel launches for the whole list, not a few per tensor.
at::Tensor probe_by_kernels(const std::vector<at::Tensor> &v, const at::Device &dev) {
  std::map<at::ScalarType, std::vector<at::Tensor>> groups;
  for (const auto &t : v)
    if (t.is_floating_point() && t.numel() > 0) groups[t.scalar_type()].push_back(t.reshape(-1));
  at::Tensor acc = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(dev));
  for (auto &g : groups) acc = acc.add(at::cat(g.second).mul(0).sum(at::kDouble));
  return acc;
}

at::Tensor unary(int op, const at::Tensor &t) {
  switch (op) {
    case LDT_NEG: return t.neg();
    case LDT_EXP: return t.exp();
    case LDT_LOG: return t.log();
    case LDT_SQRT: return t.sqrt();
    case LDT_ABS: return t.abs();
    case LDT_RELU: return at::relu(t);
    case LDT_SIGMOID: return t.sigmoid();
    case LDT_TANH: return t.tanh();
    case LDT_SQUARE: return t.square();
    case LDT_RECIPROCAL: return t.reciprocal();
    case LDT_SIGN: return t.sign();
    case LDT_ISFINITE: return at::isfinite(t);
    case LDT_ISNAN: return at::isnan(t);
    case LDT_LOGICAL_NOT: return at::logical_not(t);
  }
  throw std::invalid_argument("unknown unary op " + std::to_string(op));
}

at::Tensor binary(int op, const at::Tensor &a, const at::Tensor &b) {
  switch (op) {
    case LDT_ADD: return a.add(b);
    case LDT_SUB: return a.sub(b);
    case LDT_MUL: return a.mul(b);
    case LDT_DIV: return a.div(b);
    case LDT_POW: return a.pow(b);
    case LDT_MAXIMUM: return at::maximum(a, b);
    case LDT_MINIMUM: return at::minimum(a, b);
    case LDT_EQ: return a.eq(b);
    case LDT_NE: return a.ne(b);
    case LDT_LT: return a.lt(b);
    case LDT_LE: return a.le(b);
    case LDT_GT: return a.gt(b);
    case LDT_GE: return a.ge(b);
    case LDT_MM: return a.mm(b);
    case LDT_MATMUL: return a.matmul(b);
    case LDT_BMM: return a.bmm(b);
    case LDT_LOGICAL_AND: return at::logical_and(a, b);
    case LDT_LOGICAL_OR: return at::logical_or(a, b);
  }
  throw std::invalid_argument("unknown binary op " + std::to_string(op));
}

at::Tensor binary_scalar(int op, const at::Tensor &a, const at::Scalar &s, bool reversed) {
  if (reversed) {
    switch (op) {
      case LDT_SUB: return at::rsub(a, s);                 // s - a
      case LDT_DIV: return a.reciprocal().mul(s);          // s / a
      case LDT_POW: return at::pow(s, a);                  // s ** a
      default: throw std::invalid_argument("op " + std::to_string(op) + " has no reversed scalar form");
    }
  }
  switch (op) {
    case LDT_ADD: return a.add(s);
    case LDT_SUB: return a.sub(s);
    case LDT_MUL: return a.mul(s);
    case LDT_DIV: return a.div(s);
    case LDT_POW: return a.pow(s);
    case LDT_EQ: return a.eq(s);
    case LDT_NE: return a.ne(s);
    case LDT_LT: return a.lt(s);
    case LDT_LE: return a.le(s);
    case LDT_GT: return a.gt(s);
    case LDT_GE: return a.ge(s);
  }
  throw std::invalid_argument("unknown scalar op " + std::to_string(op));
}

at::Tensor reduce(int op, const at::Tensor &t, at::IntArrayRef dims, bool keepdim) {
  bool all = dims.empty();
  switch (op) {
    case LDT_SUM: return all ? t.sum() : t.sum(dims, keepdim);
    case LDT_MEAN: return all ? t.mean() : t.mean(dims, keepdim);
    case LDT_AMAX: return t.amax(dims, keepdim);  // empty dims = all
    case LDT_AMIN: return t.amin(dims, keepdim);
    case LDT_PROD:
      if (all) return t.prod();
      if (dims.size() != 1) throw std::invalid_argument("prod reduces over one dimension at a time");
      return t.prod(dims[0], keepdim);
    case LDT_ALL:
      if (all) return t.all();
      if (dims.size() != 1) throw std::invalid_argument("all reduces over one dimension at a time");
      return t.all(dims[0], keepdim);
    case LDT_ANY:
      if (all) return t.any();
      if (dims.size() != 1) throw std::invalid_argument("any reduces over one dimension at a time");
      return t.any(dims[0], keepdim);
    case LDT_LOGSUMEXP:
      if (all) throw std::invalid_argument("logsumexp needs dimensions");
      return t.logsumexp(dims, keepdim);
  }
  throw std::invalid_argument("unknown reduction " + std::to_string(op));
}

}  // namespace

extern "C" {

ldt_error ldt_unary(ldt_tensor *out, int op, ldt_tensor t) {
  LDT_TRY { ldt::set_out(out, unary(op, ldt::T(t))); }
  LDT_CATCH
}

ldt_error ldt_binary(ldt_tensor *out, int op, ldt_tensor a, ldt_tensor b) {
  LDT_TRY { ldt::set_out(out, binary(op, ldt::T(a), ldt::T(b))); }
  LDT_CATCH
}

ldt_error ldt_binary_scalar(ldt_tensor *out, int op, ldt_tensor a, double s, int reversed) {
  LDT_TRY { ldt::set_out(out, binary_scalar(op, ldt::T(a), at::Scalar(s), reversed != 0)); }
  LDT_CATCH
}

ldt_error ldt_reduce(ldt_tensor *out, int op, ldt_tensor t, const int64_t *dims, int ndims, int keepdim) {
  LDT_TRY { ldt::set_out(out, reduce(op, ldt::T(t), ldt::ints(dims, ndims), keepdim != 0)); }
  LDT_CATCH
}

ldt_error ldt_argmax(ldt_tensor *out, ldt_tensor t, int64_t dim, int keepdim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).argmax(dim, keepdim != 0)); }
  LDT_CATCH
}

ldt_error ldt_clamp(ldt_tensor *out, ldt_tensor t, double lo, double hi, int has_lo, int has_hi) {
  LDT_TRY {
    if (!has_lo && !has_hi) throw std::invalid_argument("clamp needs a lower or an upper bound");
    ldt::optional<at::Scalar> l, h;
    if (has_lo) l = at::Scalar(lo);
    if (has_hi) h = at::Scalar(hi);
    ldt::set_out(out, at::clamp(ldt::T(t), l, h));
  }
  LDT_CATCH
}

ldt_error ldt_linalg_solve(ldt_tensor *out, ldt_tensor a, ldt_tensor b) {
  LDT_TRY { ldt::set_out(out, at::linalg_solve(ldt::T(a), ldt::T(b))); }
  LDT_CATCH
}

// linalg_solve without its error check (which reads the LAPACK/cuSOLVER status back to the
// host, a GPU synchronisation): the same solution, and the status as an int tensor (0 =
// solved; > 0 = singular) for the caller to read when it reads anyway.
ldt_error ldt_linalg_solve_ex(ldt_tensor *out, ldt_tensor *info, ldt_tensor a, ldt_tensor b) {
  LDT_TRY {
    if (info == nullptr) throw std::invalid_argument("null output pointer");
    auto r = at::linalg_solve_ex(ldt::T(a), ldt::T(b), /*left=*/true, /*check_errors=*/false);
    ldt::set_out(out, std::get<0>(r));
    ldt::set_out(info, std::get<1>(r));
  }
  LDT_CATCH
}

ldt_error ldt_linalg_inv(ldt_tensor *out, ldt_tensor a) {
  LDT_TRY { ldt::set_out(out, at::linalg_inv(ldt::T(a))); }
  LDT_CATCH
}

ldt_error ldt_inplace(int op, ldt_tensor t, ldt_tensor other, double s) {
  LDT_TRY {
    auto &x = ldt::T(t);
    auto &o = ldt::T(other);
    switch (op) {
      case LDT_COPY_: x.copy_(o); break;
      case LDT_ADD_: x.add_(o, s); break;
      case LDT_MUL_: x.mul_(o); break;
      default: throw std::invalid_argument("unknown in-place op " + std::to_string(op));
    }
  }
  LDT_CATCH
}

ldt_error ldt_inplace_scalar(int op, ldt_tensor t, double s) {
  LDT_TRY {
    auto &x = ldt::T(t);
    switch (op) {
      case LDT_FILL_: x.fill_(s); break;
      case LDT_MUL_SCALAR_: x.mul_(s); break;
      case LDT_ADD_SCALAR_: x.add_(s); break;
      default: throw std::invalid_argument("unknown in-place scalar op " + std::to_string(op));
    }
  }
  LDT_CATCH
}

ldt_error ldt_nonfinite_probe(ldt_tensor *out, const ldt_tensor *ts, int n) {
  LDT_TRY {
    const std::vector<at::Tensor> v = ldt::list(ts, n);
    if (v.empty()) throw std::invalid_argument("no tensors to probe");
    const at::Device dev = v[0].device();
    for (const auto &t : v)
      if (t.device() != dev)
        throw std::invalid_argument("tensors on " + dev.str() + " and " + t.device().str() + " in one probe");
    at::NoGradGuard no_grad;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (!dev.is_cpu()) {
      ldt::set_out(out, probe_by_kernels(v, dev));
    } else {
      // float32 and float64 in one pass over their bits; half precision through the kernels.
      bool bad = false;
      std::vector<at::Tensor> rest;
      for (const auto &t : v) {
        const at::Tensor c = t.contiguous();
        switch (c.scalar_type()) {
          case at::kFloat:
            bad = bad || any_nonfinite<float, uint32_t, 0x7f800000u>(c.data_ptr<float>(), c.numel());
            break;
          case at::kDouble:
            bad = bad || any_nonfinite<double, uint64_t, 0x7ff0000000000000ull>(c.data_ptr<double>(), c.numel());
            break;
          default:
            if (c.is_floating_point()) rest.push_back(c);
        }
      }
      at::Tensor r = at::scalar_tensor(bad ? nan : 0.0, at::TensorOptions().dtype(at::kDouble));
      ldt::set_out(out, rest.empty() ? r : r.add(probe_by_kernels(rest, dev)));
    }
  }
  LDT_CATCH
}

ldt_error ldt_clamp_(ldt_tensor t, double lo, double hi, int has_lo, int has_hi) {
  LDT_TRY {
    if (!has_lo && !has_hi) throw std::invalid_argument("clamp needs a lower or an upper bound");
    ldt::optional<at::Scalar> l, h;
    if (has_lo) l = at::Scalar(lo);
    if (has_hi) h = at::Scalar(hi);
    at::clamp_(ldt::T(t), l, h);
  }
  LDT_CATCH
}

}  // extern "C"
