package torch

// ops_shape.go: views, reshapes, concatenation and indexing.

/*
#include "shim.h"
*/
import "C"

func shapeOp(op string, t *Tensor, shape []int64, f func(*C.ldt_tensor, C.ldt_tensor, *C.int64_t, C.int) C.ldt_error) (*Tensor, error) {
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := f(&out, h, int64Ptr(shape), C.int(len(shape)))
	return result(op, out, e)
}

// Reshape returns a tensor with the given shape (one dimension may be -1).
func (t *Tensor) Reshape(shape ...int64) (*Tensor, error) {
	return shapeOp("reshape", t, shape, func(o *C.ldt_tensor, h C.ldt_tensor, p *C.int64_t, n C.int) C.ldt_error {
		return C.ldt_reshape(o, h, p, n)
	})
}

// View returns a view with the given shape; the tensor must be compatible (contiguous).
func (t *Tensor) View(shape ...int64) (*Tensor, error) {
	return shapeOp("view", t, shape, func(o *C.ldt_tensor, h C.ldt_tensor, p *C.int64_t, n C.int) C.ldt_error {
		return C.ldt_view(o, h, p, n)
	})
}

// Expand broadcasts size-1 dimensions to the given shape without copying.
func (t *Tensor) Expand(shape ...int64) (*Tensor, error) {
	return shapeOp("expand", t, shape, func(o *C.ldt_tensor, h C.ldt_tensor, p *C.int64_t, n C.int) C.ldt_error {
		return C.ldt_expand(o, h, p, n)
	})
}

// Permute reorders the dimensions.
func (t *Tensor) Permute(dims ...int64) (*Tensor, error) {
	return shapeOp("permute", t, dims, func(o *C.ldt_tensor, h C.ldt_tensor, p *C.int64_t, n C.int) C.ldt_error {
		return C.ldt_permute(o, h, p, n)
	})
}

// Transpose swaps two dimensions.
func (t *Tensor) Transpose(d0, d1 int64) (*Tensor, error) {
	h, err := t.handle("transpose")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_transpose(&out, h, C.int64_t(d0), C.int64_t(d1))
	return result("transpose", out, e)
}

// T transposes a 2-D tensor.
func (t *Tensor) T() (*Tensor, error) { return t.Transpose(0, 1) }

// Unsqueeze inserts a dimension of size 1.
func (t *Tensor) Unsqueeze(dim int64) (*Tensor, error) {
	h, err := t.handle("unsqueeze")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_unsqueeze(&out, h, C.int64_t(dim))
	return result("unsqueeze", out, e)
}

// Squeeze removes dimension dim if its size is 1.
func (t *Tensor) Squeeze(dim int64) (*Tensor, error) {
	h, err := t.handle("squeeze")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_squeeze(&out, h, C.int64_t(dim))
	return result("squeeze", out, e)
}

// Flatten merges dimensions start..end (inclusive; -1 is the last).
func (t *Tensor) Flatten(start, end int64) (*Tensor, error) {
	h, err := t.handle("flatten")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_flatten(&out, h, C.int64_t(start), C.int64_t(end))
	return result("flatten", out, e)
}

// Contiguous returns a contiguous tensor (the same one if it already is).
func (t *Tensor) Contiguous() (*Tensor, error) {
	h, err := t.handle("contiguous")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_contiguous(&out, h)
	return result("contiguous", out, e)
}

// listOp passes the handles of ts to f, one shim call over the whole list.
func listOp(op string, ts []*Tensor, f func(out *C.ldt_tensor, list *C.ldt_tensor, n C.int) C.ldt_error) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, errorf(op, "empty tensor list")
	}
	hs, err := handles(op, ts)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := f(&out, handlePtr(hs), C.int(len(hs)))
	return result(op, out, e)
}

// Cat concatenates tensors along dim.
func Cat(ts []*Tensor, dim int64) (*Tensor, error) {
	return listOp("cat", ts, func(o *C.ldt_tensor, p *C.ldt_tensor, n C.int) C.ldt_error {
		return C.ldt_cat(o, p, n, C.int64_t(dim))
	})
}

// Stack stacks tensors along a new dimension dim.
func Stack(ts []*Tensor, dim int64) (*Tensor, error) {
	return listOp("stack", ts, func(o *C.ldt_tensor, p *C.ldt_tensor, n C.int) C.ldt_error {
		return C.ldt_stack(o, p, n, C.int64_t(dim))
	})
}

func indexOp(op string, t *Tensor, dim int64, index *Tensor, f func(*C.ldt_tensor, C.ldt_tensor, C.int64_t, C.ldt_tensor) C.ldt_error) (*Tensor, error) {
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	hi, err := index.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := f(&out, h, C.int64_t(dim), hi)
	return result(op, out, e)
}

// IndexSelect picks the entries of dim listed in the int64 tensor index.
func (t *Tensor) IndexSelect(dim int64, index *Tensor) (*Tensor, error) {
	return indexOp("index_select", t, dim, index, func(o *C.ldt_tensor, h C.ldt_tensor, d C.int64_t, i C.ldt_tensor) C.ldt_error {
		return C.ldt_index_select(o, h, d, i)
	})
}

// Gather collects values along dim at the positions in index (torch.gather).
func (t *Tensor) Gather(dim int64, index *Tensor) (*Tensor, error) {
	return indexOp("gather", t, dim, index, func(o *C.ldt_tensor, h C.ldt_tensor, d C.int64_t, i C.ldt_tensor) C.ldt_error {
		return C.ldt_gather(o, h, d, i)
	})
}

// Narrow returns the slice [start, start+length) of dim, as a view.
func (t *Tensor) Narrow(dim, start, length int64) (*Tensor, error) {
	h, err := t.handle("narrow")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_narrow(&out, h, C.int64_t(dim), C.int64_t(start), C.int64_t(length))
	return result("narrow", out, e)
}

// Select returns entry index of dim, removing that dimension.
func (t *Tensor) Select(dim, index int64) (*Tensor, error) {
	h, err := t.handle("select")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_select(&out, h, C.int64_t(dim), C.int64_t(index))
	return result("select", out, e)
}

// OneHot encodes int64 labels as an int64 table with classes columns.
func OneHot(labels *Tensor, classes int64) (*Tensor, error) {
	h, err := labels.handle("one_hot")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_one_hot(&out, h, C.int64_t(classes))
	return result("one_hot", out, e)
}

// Where picks a where cond is true, b elsewhere.
func Where(cond, a, b *Tensor) (*Tensor, error) {
	hs, err := handles("where", []*Tensor{cond, a, b})
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_where(&out, hs[0], hs[1], hs[2])
	return result("where", out, e)
}
