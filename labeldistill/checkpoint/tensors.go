package checkpoint

// tensors.go: a tensor as a checkpoint member and back, for every writer of checkpoints
// (the distillation's state, a fresh model's training).

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
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

// Fits reports why the member a cannot be restored into dst (another shape or dtype), nil
// when it can.
func Fits(dst *torch.Tensor, a *npz.Array) error {
	shape := dst.Shape()
	same := len(shape) == len(a.Shape)
	for i := 0; same && i < len(shape); i++ {
		same = int(shape[i]) == a.Shape[i]
	}
	if !same {
		return fmt.Errorf("array %q has shape %v, the run needs %v", a.Name, a.Shape, shape)
	}
	switch dst.DType() {
	case torch.Float:
		if _, ok := a.Data.([]float32); !ok {
			return fmt.Errorf("array %q is %s, the run needs float32", a.Name, a.DType)
		}
	case torch.Double:
		if _, ok := a.Data.([]float64); !ok {
			return fmt.Errorf("array %q is %s, the run needs float64", a.Name, a.DType)
		}
	default:
		return fmt.Errorf("array %q: unsupported dtype %s", a.Name, dst.DType())
	}
	return nil
}

// RestoreTensor copies a member into dst, which must have its shape and dtype (Fits); no
// gradient is recorded.
func RestoreTensor(dst *torch.Tensor, a *npz.Array) error {
	if err := Fits(dst, a); err != nil {
		return err
	}
	var src *torch.Tensor
	var err error
	switch v := a.Data.(type) {
	case []float32:
		src, err = torch.FromFloat32(v, dst.Shape()...)
	case []float64:
		src, err = torch.FromFloat64(v, dst.Shape()...)
	}
	if err != nil {
		return err
	}
	defer src.Free()
	return torch.NoGrad(func() error { return dst.Copy_(src) })
}
