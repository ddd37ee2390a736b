package nets

// params.go: parameter specifications and their PyTorch-default initialisation.

import (
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/torch"
)

// Init names how a parameter starts.
type Init int

const (
	// InitUniformFanIn draws U(−1/√fanIn, 1/√fanIn): PyTorch's default for conv and linear
	// weights (kaiming_uniform with a = √5) and biases.
	InitUniformFanIn Init = iota
	// InitNormalConv draws N(0, √(2/(k·k·out))): the authors' ResNet convolutions.
	InitNormalConv
	// InitOnes and InitZeros: BatchNorm γ and β.
	InitOnes
	InitZeros
	// InitXavierNormal draws N(0, 2/(fanIn + fanOut)) with the fans taken from the shape
	// (out, in, k…): fanIn = in·Πk, fanOut = out·Πk (torch.nn.init.xavier_normal_, gain 1).
	InitXavierNormal
)

// XavierSpecs is specs with Wang et al.'s initialisation (their dataset distillation's
// default): conv and linear weights Xavier-normal, their biases zero; other parameters
// (BatchNorm's) unchanged.
func XavierSpecs(specs []ParamSpec) []ParamSpec {
	out := append([]ParamSpec{}, specs...)
	for i, s := range out {
		if s.Init != InitUniformFanIn {
			continue
		}
		if len(s.Shape) >= 2 {
			out[i].Init = InitXavierNormal
		} else {
			out[i].Init = InitZeros
		}
	}
	return out
}

// ParamSpec describes one parameter tensor.
type ParamSpec struct {
	Name  string
	Shape []int64
	Init  Init
	FanIn int64 // InitUniformFanIn: fan-in; InitNormalConv: k·k·out
}

// BufferSpec describes one non-learned buffer (BatchNorm running statistics).
type BufferSpec struct {
	Name  string
	Shape []int64
	Fill  float64 // initial value: 0 for running means, 1 for running variances
}

func convSpecs(name string, out, in, k int64, bias bool) []ParamSpec {
	fan := in * k * k
	s := []ParamSpec{{Name: name + ".weight", Shape: []int64{out, in, k, k}, Init: InitUniformFanIn, FanIn: fan}}
	if bias {
		s = append(s, ParamSpec{Name: name + ".bias", Shape: []int64{out}, Init: InitUniformFanIn, FanIn: fan})
	}
	return s
}

func linearSpecs(name string, out, in int64) []ParamSpec {
	return []ParamSpec{
		{Name: name + ".weight", Shape: []int64{out, in}, Init: InitUniformFanIn, FanIn: in},
		{Name: name + ".bias", Shape: []int64{out}, Init: InitUniformFanIn, FanIn: in},
	}
}

// InitParams creates parameters for specs on dev, drawn from g (a CPU generator, so the
// same seed gives the same initial values on every device). The tensors are owned by the
// caller (outside any scope) and require gradients.
func InitParams(specs []ParamSpec, g *torch.Generator, dev torch.Device, dtype torch.DType) ([]*torch.Tensor, error) {
	params := make([]*torch.Tensor, 0, len(specs))
	fail := func(err error) ([]*torch.Tensor, error) {
		torch.FreeAll(params)
		return nil, err
	}
	for _, s := range specs {
		p, err := initOne(s, g, dev, dtype)
		if err != nil {
			return fail(fmt.Errorf("nets: init %s: %w", s.Name, err))
		}
		torch.Escape(p)
		if err := p.SetRequiresGrad(true); err != nil {
			p.Free()
			return fail(err)
		}
		params = append(params, p)
	}
	return params, nil
}

// Reinit redraws existing parameters in place (a model reset), keeping their identity.
func Reinit(params []*torch.Tensor, specs []ParamSpec, g *torch.Generator) error {
	if len(params) != len(specs) {
		return fmt.Errorf("nets: reinit: %d parameters for %d specs", len(params), len(specs))
	}
	return torch.NoGrad(func() error {
		for i, s := range specs {
			fresh, err := initOne(s, g, params[i].Device(), params[i].DType())
			if err != nil {
				return fmt.Errorf("nets: reinit %s: %w", s.Name, err)
			}
			err = params[i].Copy_(fresh)
			fresh.Free()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func initOne(s ParamSpec, g *torch.Generator, dev torch.Device, dtype torch.DType) (*torch.Tensor, error) {
	switch s.Init {
	case InitOnes:
		return torch.Ones(s.Shape, torch.WithDType(dtype), torch.OnDevice(dev))
	case InitZeros:
		return torch.Zeros(s.Shape, torch.WithDType(dtype), torch.OnDevice(dev))
	}
	var c torch.Chain
	var t *torch.Tensor
	switch s.Init {
	case InitUniformFanIn:
		bound := 1 / math.Sqrt(float64(s.FanIn))
		u := c.T(torch.Rand(s.Shape, g, torch.WithDType(dtype)))
		t = c.T(c.T(u.MulScalar(2 * bound)).SubScalar(bound))
		u.Free()
	case InitNormalConv:
		n := c.T(torch.Randn(s.Shape, g, torch.WithDType(dtype)))
		t = c.T(n.MulScalar(math.Sqrt(2 / float64(s.FanIn))))
		n.Free()
	case InitXavierNormal:
		if len(s.Shape) < 2 {
			return nil, fmt.Errorf("xavier initialisation of a %d-d tensor", len(s.Shape))
		}
		field := int64(1)
		for _, d := range s.Shape[2:] {
			field *= d
		}
		fanIn, fanOut := s.Shape[1]*field, s.Shape[0]*field
		n := c.T(torch.Randn(s.Shape, g, torch.WithDType(dtype)))
		t = c.T(n.MulScalar(math.Sqrt(2 / float64(fanIn+fanOut))))
		n.Free()
	default:
		return nil, fmt.Errorf("unknown init %d", s.Init)
	}
	if c.Err() != nil {
		t.Free()
		return nil, c.Err()
	}
	if dev == torch.CPU {
		return t, nil
	}
	moved, err := t.To(dev)
	t.Free()
	return moved, err
}

// NewBuffers creates BatchNorm running statistics for specs on dev (caller-owned).
func NewBuffers(specs []BufferSpec, dev torch.Device, dtype torch.DType) ([]*torch.Tensor, error) {
	bufs := make([]*torch.Tensor, 0, len(specs))
	for _, s := range specs {
		b, err := torch.Full(s.Shape, s.Fill, torch.WithDType(dtype), torch.OnDevice(dev))
		if err != nil {
			torch.FreeAll(bufs)
			return nil, err
		}
		torch.Escape(b)
		bufs = append(bufs, b)
	}
	return bufs, nil
}

// CountParams returns the number of scalar parameters in specs.
func CountParams(specs []ParamSpec) int64 {
	var n int64
	for _, s := range specs {
		c := int64(1)
		for _, d := range s.Shape {
			c *= d
		}
		n += c
	}
	return n
}
