package nets

// net.go: Net, the common shape of every network: a body (feature extractor) and a
// linear head, with a constructor by architecture name.

import (
	"fmt"
	"strings"

	"github.com/ldtorch/ldtorch/torch"
)

// Net is a functional network: the parameters and buffers live with the caller. Run
// Forward and Features inside a torch.Scope: intermediate tensors belong to it.
type Net struct {
	Arch string // "lenet", "alexnet", "resnet", "convnet" or "torchscript:FILE"
	// FileSHA256 is the SHA-256 of a TorchScript network's file, read as it was loaded (a run
	// records it, so that a file changed later is noticed); "" for the built-in networks.
	FileSHA256 string
	InShape    [3]int64 // C, H, W
	Classes    int64
	FeatureDim int64        // width of the body's output (d)
	Body       []ParamSpec  // feature-extractor parameters, in order
	Buffers    []BufferSpec // BatchNorm running statistics (resnet only)
	body       body         // written once over layers (layers.go)
	xavier     bool         // Head's weights Xavier-normal, bias zero (XavierInit)
	script     *scriptNet   // a network from a TorchScript file (torchscript.go), else nil
}

// XavierInit is a copy of n whose conv and linear weights start Xavier-normal and biases
// at zero (XavierSpecs): the initialisation of Wang et al.'s dataset distillation.
func (n *Net) XavierInit() *Net {
	x := *n
	x.Body = XavierSpecs(n.Body)
	x.xavier = true
	return &x
}

// Archs lists the architecture names New accepts.
var Archs = []string{"lenet", "alexnet", "resnet", "convnet"}

// New builds the network arch for inputs of shape (c, h, w) and the given class count.
// arch is one of Archs, or "torchscript:FILE", a TorchScript file that meets the contract
// of the package documentation ("TorchScript networks"); such a network holds the loaded
// module until Close.
func New(arch string, c, h, w, classes int64) (*Net, error) {
	if classes < 2 {
		return nil, fmt.Errorf("nets: need at least 2 classes, got %d", classes)
	}
	if IsTorchScript(arch) {
		return newTorchScript(arch, c, h, w, classes)
	}
	switch arch {
	case "lenet":
		return newLeNet(c, h, w, classes)
	case "alexnet":
		return newAlexCifarNet(c, h, w, classes)
	case "resnet":
		return newCifarResNet(c, h, w, classes)
	case "convnet":
		return newConvNet(c, h, w, classes)
	}
	return nil, fmt.Errorf("nets: unknown architecture %q (known: %s, %sFILE)", arch, strings.Join(Archs, ", "), TorchScriptPrefix)
}

// Head is the final linear layer's parameters (FeatureDim → Classes): fc.weight and fc.bias,
// or head.weight and head.bias for a TorchScript network.
func (n *Net) Head() []ParamSpec {
	name := "fc"
	if n.script != nil {
		name = "head"
	}
	h := linearSpecs(name, n.Classes, n.FeatureDim)
	if n.xavier {
		h = XavierSpecs(h)
	}
	return h
}

// Params is Body followed by Head: the full classifier's parameters.
func (n *Net) Params() []ParamSpec {
	return append(append([]ParamSpec{}, n.Body...), n.Head()...)
}

// Features runs the body. p must hold at least the body's parameters (a full parameter
// list works too). In training mode BatchNorm uses batch statistics and updates buf.
func (n *Net) Features(p, buf []*torch.Tensor, x *torch.Tensor, train bool) (*torch.Tensor, error) {
	if len(p) < len(n.Body) {
		return nil, fmt.Errorf("nets: %s needs %d body parameters, got %d", n.Arch, len(n.Body), len(p))
	}
	if len(buf) != len(n.Buffers) {
		return nil, fmt.Errorf("nets: %s needs %d buffers, got %d", n.Arch, len(n.Buffers), len(buf))
	}
	if err := n.checkInput(x); err != nil {
		return nil, err
	}
	if n.script != nil {
		return n.script.call(n, "features", n.script.featNames, p, buf, x, train, n.FeatureDim)
	}
	var c torch.Chain
	f := n.body(oneModel{}, &c, p, buf, x, train)
	return f, c.Err()
}

// Forward returns the logits (B, Classes) for the full parameter list (Body then Head).
func (n *Net) Forward(p, buf []*torch.Tensor, x *torch.Tensor, train bool) (*torch.Tensor, error) {
	nb := len(n.Body)
	if len(p) != nb+2 {
		return nil, fmt.Errorf("nets: %s needs %d parameters, got %d", n.Arch, nb+2, len(p))
	}
	if n.script != nil {
		if len(buf) != len(n.Buffers) {
			return nil, fmt.Errorf("nets: %s needs %d buffers, got %d", n.Arch, len(n.Buffers), len(buf))
		}
		if err := n.checkInput(x); err != nil {
			return nil, err
		}
		return n.script.call(n, "forward", n.script.fwdNames, p, buf, x, train, n.Classes)
	}
	f, err := n.Features(p, buf, x, train)
	if err != nil {
		return nil, err
	}
	return torch.Linear(f, p[nb], p[nb+1])
}

func (n *Net) checkInput(x *torch.Tensor) error {
	s := x.Shape()
	if len(s) != 4 || s[1] != n.InShape[0] || s[2] != n.InShape[1] || s[3] != n.InShape[2] {
		return fmt.Errorf("nets: %s expects input (B, %d, %d, %d), got %v", n.Arch, n.InShape[0], n.InShape[1], n.InShape[2], s)
	}
	return nil
}

// Model bundles a network with its parameters and buffers (owned by the model).
type Model struct {
	Net     *Net
	Params  []*torch.Tensor
	Buffers []*torch.Tensor
}

// NewModel initialises a full classifier (body and head).
func NewModel(n *Net, g *torch.Generator, dev torch.Device) (*Model, error) {
	p, err := InitParams(n.Params(), g, dev, torch.Float)
	if err != nil {
		return nil, err
	}
	b, err := NewBuffers(n.Buffers, dev, torch.Float)
	if err != nil {
		torch.FreeAll(p)
		return nil, err
	}
	return &Model{Net: n, Params: p, Buffers: b}, nil
}

// Close frees the model's tensors.
func (m *Model) Close() {
	torch.FreeAll(m.Params)
	torch.FreeAll(m.Buffers)
	m.Params, m.Buffers = nil, nil
}
