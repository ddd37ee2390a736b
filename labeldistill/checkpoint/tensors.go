package checkpoint

// tensors.go: a tensor as a checkpoint member and back, for every writer of checkpoints
// (the distillation's state, a fresh model's training).

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/npz"
)

// TensorArray copies t (float32 or float64, on any device) to the host as the member name,
// its values as they are (NaN and infinities included: the caller decides what it accepts).
func TensorArray(name string, t *torch.Tensor) (*npz.Array, error) {
	if t == nil || t.Freed() {
		return nil, fmt.Errorf("checkpoint: tensor %q is missing", name)
	}
	shape := make([]int, 0, t.Dim())
	for _, d := range t.Shape() {
		shape = append(shape, int(d))
	}
	var data any
	var err error
	switch t.DType() {
	case torch.Float:
		data, err = t.Float32s()
	case torch.Double:
		data, err = t.Float64s()
	default:
		return nil, fmt.Errorf("checkpoint: tensor %q has unsupported dtype %s", name, t.DType())
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tensor %q: %w", name, err)
	}
	return npz.New(name, shape, data)
}

// RestoreTensor copies a member into dst, which must have its shape and dtype; no gradient
// is recorded.
func RestoreTensor(dst *torch.Tensor, a *npz.Array) error {
	shape := dst.Shape()
	if len(shape) != len(a.Shape) {
		return fmt.Errorf("array %q has shape %v, the run needs %v", a.Name, a.Shape, shape)
	}
	for i := range shape {
		if int(shape[i]) != a.Shape[i] {
			return fmt.Errorf("array %q has shape %v, the run needs %v", a.Name, a.Shape, shape)
		}
	}
	var src *torch.Tensor
	var err error
	switch dst.DType() {
	case torch.Float:
		v, ok := a.Data.([]float32)
		if !ok {
			return fmt.Errorf("array %q is %s, the run needs float32", a.Name, a.DType)
		}
		src, err = torch.FromFloat32(v, shape...)
	case torch.Double:
		v, ok := a.Data.([]float64)
		if !ok {
			return fmt.Errorf("array %q is %s, the run needs float64", a.Name, a.DType)
		}
		src, err = torch.FromFloat64(v, shape...)
	default:
		return fmt.Errorf("array %q: unsupported dtype %s", a.Name, dst.DType())
	}
	if err != nil {
		return err
	}
	defer src.Free()
	return torch.NoGrad(func() error { return dst.Copy_(src) })
}
