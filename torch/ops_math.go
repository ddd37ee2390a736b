package torch

// ops_math.go: pointwise arithmetic, comparisons, reductions, clamping, matrix products,
// linear algebra and in-place updates.

/*
#include "shim.h"
*/
import "C"

func unary(op string, code C.int, t *Tensor) (*Tensor, error) {
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_unary(&out, code, h)
	return result(op, out, e)
}

func binary(op string, code C.int, a, b *Tensor) (*Tensor, error) {
	ha, err := a.handle(op)
	if err != nil {
		return nil, err
	}
	hb, err := b.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_binary(&out, code, ha, hb)
	return result(op, out, e)
}

func scalar(op string, code C.int, a *Tensor, s float64, reversed bool) (*Tensor, error) {
	h, err := a.handle(op)
	if err != nil {
		return nil, err
	}
	rev := C.int(0)
	if reversed {
		rev = 1
	}
	var out C.ldt_tensor
	e := C.ldt_binary_scalar(&out, code, h, C.double(s), rev)
	return result(op, out, e)
}

func reduce(op string, code C.int, t *Tensor, dims []int64, keepdim bool) (*Tensor, error) {
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_reduce(&out, code, h, int64Ptr(dims), C.int(len(dims)), cbool(keepdim))
	return result(op, out, e)
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Unary ops.
func (t *Tensor) Neg() (*Tensor, error)        { return unary("neg", C.LDT_NEG, t) }
func (t *Tensor) Exp() (*Tensor, error)        { return unary("exp", C.LDT_EXP, t) }
func (t *Tensor) Log() (*Tensor, error)        { return unary("log", C.LDT_LOG, t) }
func (t *Tensor) Sqrt() (*Tensor, error)       { return unary("sqrt", C.LDT_SQRT, t) }
func (t *Tensor) Abs() (*Tensor, error)        { return unary("abs", C.LDT_ABS, t) }
func (t *Tensor) Relu() (*Tensor, error)       { return unary("relu", C.LDT_RELU, t) }
func (t *Tensor) Sigmoid() (*Tensor, error)    { return unary("sigmoid", C.LDT_SIGMOID, t) }
func (t *Tensor) Tanh() (*Tensor, error)       { return unary("tanh", C.LDT_TANH, t) }
func (t *Tensor) Square() (*Tensor, error)     { return unary("square", C.LDT_SQUARE, t) }
func (t *Tensor) Reciprocal() (*Tensor, error) { return unary("reciprocal", C.LDT_RECIPROCAL, t) }
func (t *Tensor) Sign() (*Tensor, error)       { return unary("sign", C.LDT_SIGN, t) }

// IsFinite returns a bool tensor, true where the element is neither NaN nor infinite.
func (t *Tensor) IsFinite() (*Tensor, error) { return unary("isfinite", C.LDT_ISFINITE, t) }

// NonFiniteProbe returns a 0-dim float64 tensor on the tensors' device (one device for all):
// 0 when every element of every floating-point tensor in ts is finite, NaN otherwise. It is
// computed where the tensors are and not read back (on a GPU: a few kernels for the whole
// list, where a product and a sum per tensor would launch two per tensor), so a training
// loop can fold it into the values it reads anyway. No gradient flows through it.
func NonFiniteProbe(ts ...*Tensor) (*Tensor, error) {
	const op = "nonfinite_probe"
	if len(ts) == 0 {
		return nil, errorf(op, "no tensors to probe")
	}
	return listOp(op, ts, func(o *C.ldt_tensor, p *C.ldt_tensor, n C.int) C.ldt_error {
		return C.ldt_nonfinite_probe(o, p, n)
	})
}
func (t *Tensor) IsNaN() (*Tensor, error)      { return unary("isnan", C.LDT_ISNAN, t) }
func (t *Tensor) LogicalNot() (*Tensor, error) { return unary("logical_not", C.LDT_LOGICAL_NOT, t) }

// Relu is the rectified linear unit, max(x, 0).
func Relu(x *Tensor) (*Tensor, error) { return x.Relu() }

// Binary ops with broadcasting.
func (t *Tensor) Add(o *Tensor) (*Tensor, error)     { return binary("add", C.LDT_ADD, t, o) }
func (t *Tensor) Sub(o *Tensor) (*Tensor, error)     { return binary("sub", C.LDT_SUB, t, o) }
func (t *Tensor) Mul(o *Tensor) (*Tensor, error)     { return binary("mul", C.LDT_MUL, t, o) }
func (t *Tensor) Div(o *Tensor) (*Tensor, error)     { return binary("div", C.LDT_DIV, t, o) }
func (t *Tensor) Pow(o *Tensor) (*Tensor, error)     { return binary("pow", C.LDT_POW, t, o) }
func (t *Tensor) Maximum(o *Tensor) (*Tensor, error) { return binary("maximum", C.LDT_MAXIMUM, t, o) }
func (t *Tensor) Minimum(o *Tensor) (*Tensor, error) { return binary("minimum", C.LDT_MINIMUM, t, o) }
func (t *Tensor) Eq(o *Tensor) (*Tensor, error)      { return binary("eq", C.LDT_EQ, t, o) }
func (t *Tensor) Ne(o *Tensor) (*Tensor, error)      { return binary("ne", C.LDT_NE, t, o) }
func (t *Tensor) Lt(o *Tensor) (*Tensor, error)      { return binary("lt", C.LDT_LT, t, o) }
func (t *Tensor) Le(o *Tensor) (*Tensor, error)      { return binary("le", C.LDT_LE, t, o) }
func (t *Tensor) Gt(o *Tensor) (*Tensor, error)      { return binary("gt", C.LDT_GT, t, o) }
func (t *Tensor) Ge(o *Tensor) (*Tensor, error)      { return binary("ge", C.LDT_GE, t, o) }
func (t *Tensor) LogicalAnd(o *Tensor) (*Tensor, error) {
	return binary("logical_and", C.LDT_LOGICAL_AND, t, o)
}
func (t *Tensor) LogicalOr(o *Tensor) (*Tensor, error) {
	return binary("logical_or", C.LDT_LOGICAL_OR, t, o)
}

// Mm is the matrix product of two 2-D tensors.
func (t *Tensor) Mm(o *Tensor) (*Tensor, error) { return binary("mm", C.LDT_MM, t, o) }

// Matmul is torch.matmul (broadcasting batched products).
func (t *Tensor) Matmul(o *Tensor) (*Tensor, error) { return binary("matmul", C.LDT_MATMUL, t, o) }

// Bmm is the batched matrix product of two 3-D tensors.
func (t *Tensor) Bmm(o *Tensor) (*Tensor, error) { return binary("bmm", C.LDT_BMM, t, o) }

// Mm is the matrix product a·b.
func Mm(a, b *Tensor) (*Tensor, error) { return a.Mm(b) }

// Matmul is torch.matmul.
func Matmul(a, b *Tensor) (*Tensor, error) { return a.Matmul(b) }

// Bmm is the batched matrix product.
func Bmm(a, b *Tensor) (*Tensor, error) { return a.Bmm(b) }

// Scalar forms.
func (t *Tensor) AddScalar(s float64) (*Tensor, error) {
	return scalar("add_scalar", C.LDT_ADD, t, s, false)
}
func (t *Tensor) SubScalar(s float64) (*Tensor, error) {
	return scalar("sub_scalar", C.LDT_SUB, t, s, false)
}
func (t *Tensor) MulScalar(s float64) (*Tensor, error) {
	return scalar("mul_scalar", C.LDT_MUL, t, s, false)
}
func (t *Tensor) DivScalar(s float64) (*Tensor, error) {
	return scalar("div_scalar", C.LDT_DIV, t, s, false)
}
func (t *Tensor) PowScalar(s float64) (*Tensor, error) {
	return scalar("pow_scalar", C.LDT_POW, t, s, false)
}
func (t *Tensor) EqScalar(s float64) (*Tensor, error) {
	return scalar("eq_scalar", C.LDT_EQ, t, s, false)
}
func (t *Tensor) NeScalar(s float64) (*Tensor, error) {
	return scalar("ne_scalar", C.LDT_NE, t, s, false)
}
func (t *Tensor) LtScalar(s float64) (*Tensor, error) {
	return scalar("lt_scalar", C.LDT_LT, t, s, false)
}
func (t *Tensor) LeScalar(s float64) (*Tensor, error) {
	return scalar("le_scalar", C.LDT_LE, t, s, false)
}
func (t *Tensor) GtScalar(s float64) (*Tensor, error) {
	return scalar("gt_scalar", C.LDT_GT, t, s, false)
}
func (t *Tensor) GeScalar(s float64) (*Tensor, error) {
	return scalar("ge_scalar", C.LDT_GE, t, s, false)
}

// RSubScalar returns s − t.
func (t *Tensor) RSubScalar(s float64) (*Tensor, error) {
	return scalar("rsub_scalar", C.LDT_SUB, t, s, true)
}

// RDivScalar returns s / t.
func (t *Tensor) RDivScalar(s float64) (*Tensor, error) {
	return scalar("rdiv_scalar", C.LDT_DIV, t, s, true)
}

// Reductions. With no dims they reduce over every dimension.
func (t *Tensor) Sum(dims ...int64) (*Tensor, error) { return reduce("sum", C.LDT_SUM, t, dims, false) }
func (t *Tensor) Mean(dims ...int64) (*Tensor, error) {
	return reduce("mean", C.LDT_MEAN, t, dims, false)
}
func (t *Tensor) Amax(dims ...int64) (*Tensor, error) {
	return reduce("amax", C.LDT_AMAX, t, dims, false)
}
func (t *Tensor) Amin(dims ...int64) (*Tensor, error) {
	return reduce("amin", C.LDT_AMIN, t, dims, false)
}
func (t *Tensor) Prod(dims ...int64) (*Tensor, error) {
	return reduce("prod", C.LDT_PROD, t, dims, false)
}
func (t *Tensor) All(dims ...int64) (*Tensor, error) { return reduce("all", C.LDT_ALL, t, dims, false) }
func (t *Tensor) Any(dims ...int64) (*Tensor, error) { return reduce("any", C.LDT_ANY, t, dims, false) }

// SumKeepDim sums over dims and keeps them with size 1.
func (t *Tensor) SumKeepDim(dims ...int64) (*Tensor, error) {
	return reduce("sum", C.LDT_SUM, t, dims, true)
}

// MeanKeepDim averages over dims and keeps them with size 1.
func (t *Tensor) MeanKeepDim(dims ...int64) (*Tensor, error) {
	return reduce("mean", C.LDT_MEAN, t, dims, true)
}

// LogSumExp reduces dims with log Σ exp.
func (t *Tensor) LogSumExp(dims ...int64) (*Tensor, error) {
	return reduce("logsumexp", C.LDT_LOGSUMEXP, t, dims, false)
}

// Argmax returns the int64 index of the largest element along dim.
func (t *Tensor) Argmax(dim int64, keepdim bool) (*Tensor, error) {
	h, err := t.handle("argmax")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_argmax(&out, h, C.int64_t(dim), cbool(keepdim))
	return result("argmax", out, e)
}

// Clamp limits elements to [lo, hi].
func (t *Tensor) Clamp(lo, hi float64) (*Tensor, error) { return t.clamp(lo, hi, true, true) }

// ClampMin limits elements from below.
func (t *Tensor) ClampMin(lo float64) (*Tensor, error) { return t.clamp(lo, 0, true, false) }

// ClampMax limits elements from above.
func (t *Tensor) ClampMax(hi float64) (*Tensor, error) { return t.clamp(0, hi, false, true) }

func (t *Tensor) clamp(lo, hi float64, hasLo, hasHi bool) (*Tensor, error) {
	h, err := t.handle("clamp")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_clamp(&out, h, C.double(lo), C.double(hi), cbool(hasLo), cbool(hasHi))
	return result("clamp", out, e)
}

// LinalgSolve solves a·x = b (torch.linalg.solve).
func LinalgSolve(a, b *Tensor) (*Tensor, error) {
	ha, err := a.handle("linalg_solve")
	if err != nil {
		return nil, err
	}
	hb, err := b.handle("linalg_solve")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_linalg_solve(&out, ha, hb)
	return result("linalg_solve", out, e)
}

// LinalgSolveEx solves a·x = b like LinalgSolve but without its error check, which reads
// the solver's status back to the host (on a GPU, a wait for all queued work). info holds
// the status per system (int32: 0 = solved, > 0 = singular, and then x is not a solution):
// read it when reading anyway, or use LinalgSolve.
func LinalgSolveEx(a, b *Tensor) (x, info *Tensor, err error) {
	ha, err := a.handle("linalg_solve_ex")
	if err != nil {
		return nil, nil, err
	}
	hb, err := b.handle("linalg_solve_ex")
	if err != nil {
		return nil, nil, err
	}
	var out, inf C.ldt_tensor
	if err := cerr("linalg_solve_ex", C.ldt_linalg_solve_ex(&out, &inf, ha, hb)); err != nil {
		return nil, nil, err
	}
	return wrap(out), wrap(inf), nil
}

// LinalgInv inverts a square matrix (torch.linalg.inv).
func LinalgInv(a *Tensor) (*Tensor, error) {
	h, err := a.handle("linalg_inv")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_linalg_inv(&out, h)
	return result("linalg_inv", out, e)
}

// ---- in-place updates ---------------------------------------------------------------------------

func inplace(op string, code C.int, t, o *Tensor, s float64) error {
	h, err := t.handle(op)
	if err != nil {
		return err
	}
	ho, err := o.handle(op)
	if err != nil {
		return err
	}
	return cerr(op, C.ldt_inplace(code, h, ho, C.double(s)))
}

func inplaceScalar(op string, code C.int, t *Tensor, s float64) error {
	h, err := t.handle(op)
	if err != nil {
		return err
	}
	return cerr(op, C.ldt_inplace_scalar(code, h, C.double(s)))
}

// Copy_ copies src into t in place (broadcasting, converting dtype and device).
func (t *Tensor) Copy_(src *Tensor) error { return inplace("copy_", C.LDT_COPY_, t, src, 0) }

// AddScaled_ adds alpha·o to t in place (e.g. θ ← θ − α·g under NoGrad).
func (t *Tensor) AddScaled_(o *Tensor, alpha float64) error {
	return inplace("add_", C.LDT_ADD_, t, o, alpha)
}

// Mul_ multiplies t by o in place.
func (t *Tensor) Mul_(o *Tensor) error { return inplace("mul_", C.LDT_MUL_, t, o, 0) }

// Fill_ sets every element to v.
func (t *Tensor) Fill_(v float64) error { return inplaceScalar("fill_", C.LDT_FILL_, t, v) }

// Zero_ sets every element to 0.
func (t *Tensor) Zero_() error { return inplaceScalar("zero_", C.LDT_FILL_, t, 0) }

// MulScalar_ multiplies every element by s.
func (t *Tensor) MulScalar_(s float64) error {
	return inplaceScalar("mul_scalar_", C.LDT_MUL_SCALAR_, t, s)
}

// AddScalar_ adds s to every element.
func (t *Tensor) AddScalar_(s float64) error {
	return inplaceScalar("add_scalar_", C.LDT_ADD_SCALAR_, t, s)
}

// Clamp_ limits elements to [lo, hi] in place.
func (t *Tensor) Clamp_(lo, hi float64) error {
	h, err := t.handle("clamp_")
	if err != nil {
		return err
	}
	return cerr("clamp_", C.ldt_clamp_(h, C.double(lo), C.double(hi), 1, 1))
}
