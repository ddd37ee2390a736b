package engine

// dataset.go: the host-side data a run consumes (already split and normalised by the data
// package), and its upload to the device as resident tensors: after this no step copies
// images between host and device or touches individual images.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

// Data is a run's data (data.Run): the target task's splits and the base examples.
type Data = data.Run

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
