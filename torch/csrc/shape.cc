// shape.cc: views, reshapes, concatenation and indexing.
#include <ATen/ATen.h>

#include "internal.h"

extern "C" {

ldt_error ldt_reshape(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).reshape(ldt::ints(shape, ndim))); }
  LDT_CATCH
}

ldt_error ldt_view(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).view(ldt::ints(shape, ndim))); }
  LDT_CATCH
}

ldt_error ldt_expand(ldt_tensor *out, ldt_tensor t, const int64_t *shape, int ndim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).expand(ldt::ints(shape, ndim))); }
  LDT_CATCH
}

ldt_error ldt_transpose(ldt_tensor *out, ldt_tensor t, int64_t d0, int64_t d1) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).transpose(d0, d1)); }
  LDT_CATCH
}

ldt_error ldt_permute(ldt_tensor *out, ldt_tensor t, const int64_t *dims, int ndim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).permute(ldt::ints(dims, ndim))); }
  LDT_CATCH
}

ldt_error ldt_unsqueeze(ldt_tensor *out, ldt_tensor t, int64_t dim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).unsqueeze(dim)); }
  LDT_CATCH
}

ldt_error ldt_squeeze(ldt_tensor *out, ldt_tensor t, int64_t dim) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).squeeze(dim)); }
  LDT_CATCH
}

ldt_error ldt_flatten(ldt_tensor *out, ldt_tensor t, int64_t start, int64_t end) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).flatten(start, end)); }
  LDT_CATCH
}

ldt_error ldt_contiguous(ldt_tensor *out, ldt_tensor t) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).contiguous()); }
  LDT_CATCH
}

ldt_error ldt_cat(ldt_tensor *out, const ldt_tensor *ts, int n, int64_t dim) {
  LDT_TRY { ldt::set_out(out, at::cat(ldt::list(ts, n), dim)); }
  LDT_CATCH
}

ldt_error ldt_stack(ldt_tensor *out, const ldt_tensor *ts, int n, int64_t dim) {
  LDT_TRY { ldt::set_out(out, at::stack(ldt::list(ts, n), dim)); }
  LDT_CATCH
}

ldt_error ldt_index_select(ldt_tensor *out, ldt_tensor t, int64_t dim, ldt_tensor index) {
  LDT_TRY { ldt::set_out(out, at::index_select(ldt::T(t), dim, ldt::T(index))); }
  LDT_CATCH
}

ldt_error ldt_gather(ldt_tensor *out, ldt_tensor t, int64_t dim, ldt_tensor index) {
  LDT_TRY { ldt::set_out(out, at::gather(ldt::T(t), dim, ldt::T(index))); }
  LDT_CATCH
}

ldt_error ldt_narrow(ldt_tensor *out, ldt_tensor t, int64_t dim, int64_t start, int64_t length) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).narrow(dim, start, length)); }
  LDT_CATCH
}

ldt_error ldt_select(ldt_tensor *out, ldt_tensor t, int64_t dim, int64_t index) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).select(dim, index)); }
  LDT_CATCH
}

ldt_error ldt_one_hot(ldt_tensor *out, ldt_tensor labels, int64_t classes) {
  LDT_TRY {
    ldt::check_classes(ldt::T(labels), classes, "one_hot");
    ldt::set_out(out, at::one_hot(ldt::T(labels), classes));
  }
  LDT_CATCH
}

ldt_error ldt_where(ldt_tensor *out, ldt_tensor cond, ldt_tensor a, ldt_tensor b) {
  LDT_TRY { ldt::set_out(out, at::where(ldt::T(cond), ldt::T(a), ldt::T(b))); }
  LDT_CATCH
}

}  // extern "C"
