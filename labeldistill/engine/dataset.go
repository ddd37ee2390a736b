package engine

// dataset.go: the host-side data a run consumes (already split and normalised by the data
// package), and its upload to the device as resident tensors: after this no step copies
// images between host and device or touches individual images.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

// Data is everything Distill needs: the target task's splits and the base examples, each a
// data.Split of normalised images (N×C×H×W float32, row-major) and int64 labels.
type Data struct {
	Target, Source string
	Classes        int        // of the target task (the label space)
	Shape          [3]int64   // C, H, W
	TargetSet      data.Split // what the meta-loop's outer batches are drawn from
	Validation     data.Split
	Test           data.Split
	Base           data.Split // base examples; Labels are true labels (target space within-dataset; source labels cross-dataset)
	BaseIndices    []int64    // indices of the base examples in the source's train split (file order)
	Files          map[string]string
	// Warnings are the data package's notes on the data read (unknown checksums accepted,
	// a subset layout, a JPEG copy, adapted split sizes).
	Warnings []string
	// NormMean and NormStd are the target's per-channel normalisation as applied (an image
	// folder's are computed from its train images unless given).
	NormMean, NormStd []float64
}

func (d *Data) imageSize() int { return int(d.Shape[0] * d.Shape[1] * d.Shape[2]) }

// check verifies the buffers agree with the declared shape and label range.
func (d *Data) check() error {
	if d.Classes < 2 {
		return fmt.Errorf("dataset: need at least 2 classes, got %d", d.Classes)
	}
	for _, p := range []struct {
		name string
		s    *data.Split
		lab  bool
	}{{"target set", &d.TargetSet, true}, {"validation", &d.Validation, true}, {"test", &d.Test, true}, {"base", &d.Base, false}} {
		if p.s.N == 0 {
			return fmt.Errorf("dataset: the %s split is empty", p.name)
		}
		if p.s.N != len(p.s.Labels) || [3]int64{int64(p.s.C), int64(p.s.H), int64(p.s.W)} != d.Shape {
			return fmt.Errorf("dataset: the %s split says %d images of %d×%d×%d with %d labels, the dataset's images are %v", p.name, p.s.N, p.s.C, p.s.H, p.s.W, len(p.s.Labels), d.Shape)
		}
		if len(p.s.Images) != p.s.N*d.imageSize() {
			return fmt.Errorf("dataset: the %s split has %d floats for %d images of %v", p.name, len(p.s.Images), p.s.N, d.Shape)
		}
		if p.lab {
			for i, y := range p.s.Labels {
				if y < 0 || y >= int64(d.Classes) {
					return fmt.Errorf("dataset: %s label %d at index %d is outside 0..%d", p.name, y, i, d.Classes-1)
				}
			}
		}
	}
	return nil
}

// deviceSplit is a split resident on the device.
type deviceSplit struct{ x, y *torch.Tensor }

func (s deviceSplit) free() {
	s.x.Free()
	s.y.Free()
}

func upload(s *data.Split, shape [3]int64, dev torch.Device) (deviceSplit, error) {
	x, y, err := SplitTensors(s, shape, dev)
	if err != nil {
		return deviceSplit{}, err
	}
	torch.Escape(x, y)
	return deviceSplit{x: x, y: y}, nil
}

// SplitTensors are the split's images (N, C, H, W for shape C, H, W) and labels (N) as
// tensors on dev, in the caller's scope.
func SplitTensors(s *data.Split, shape [3]int64, dev torch.Device) (x, y *torch.Tensor, err error) {
	n := int64(s.N)
	if x, err = torch.FromFloat32(s.Images, n, shape[0], shape[1], shape[2]); err != nil {
		return nil, nil, err
	}
	if y, err = torch.FromInt64(s.Labels, n); err != nil {
		x.Free()
		return nil, nil, err
	}
	if dev != torch.CPU {
		xd, err1 := x.To(dev)
		yd, err2 := y.To(dev)
		x.Free()
		y.Free()
		if err1 != nil || err2 != nil {
			xd.Free()
			yd.Free()
			return nil, nil, fmt.Errorf("upload to %s: %v %v", dev, err1, err2)
		}
		x, y = xd, yd
	}
	return x, y, nil
}
