package nets

// torchscript.go: networks from TorchScript files, nets.New("torchscript:FILE", …): the
// contract (doc.go, "TorchScript networks") checked at load, PyTorch's per-layer default
// initialisation as ParamSpecs, BatchNorm's running statistics as buffers, and Forward and
// Features as functional calls of the module's forward and features methods.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/torch"
)

// TorchScriptPrefix starts an architecture name that is a TorchScript file:
// "torchscript:path/to/model.pt".
const TorchScriptPrefix = "torchscript:"

// IsTorchScript reports whether arch names a TorchScript file.
func IsTorchScript(arch string) bool { return strings.HasPrefix(arch, TorchScriptPrefix) }

// contract is the reminder every contract error ends with.
const contract = "the contract: a method features(x) returning (B, D), a submodule head that is an nn.Linear(D, classes), " +
	"forward(x) = head(features(x)); scripts/export_torchscript.py exports modules that meet it"

// Layer types whose parameters nets initialises as PyTorch does (reset_parameters of each):
// the convolutions and Linear take kaiming_uniform(a = √5) weights, U(±1/√fan_in), and
// U(±1/√fan_in) biases, fan_in from the weight's shape; the normalisations weight 1, bias 0.
var (
	fanInLayers = []string{
		"torch.nn.modules.conv.Conv1d", "torch.nn.modules.conv.Conv2d", "torch.nn.modules.conv.Conv3d",
		"torch.nn.modules.conv.ConvTranspose1d", "torch.nn.modules.conv.ConvTranspose2d",
		"torch.nn.modules.conv.ConvTranspose3d", "torch.nn.modules.linear.Linear",
	}
	// statsLayers keep running statistics: their buffers running_mean, running_var and
	// num_batches_tracked are the net's Buffers.
	statsLayers = []string{
		"torch.nn.modules.batchnorm.BatchNorm1d", "torch.nn.modules.batchnorm.BatchNorm2d",
		"torch.nn.modules.batchnorm.BatchNorm3d", "torch.nn.modules.batchnorm.SyncBatchNorm",
		"torch.nn.modules.instancenorm.InstanceNorm1d", "torch.nn.modules.instancenorm.InstanceNorm2d",
		"torch.nn.modules.instancenorm.InstanceNorm3d",
	}
	normLayers = append([]string{"torch.nn.modules.normalization.LayerNorm", "torch.nn.modules.normalization.GroupNorm"}, statsLayers...)
	statsFill  = map[string]float64{"running_mean": 0, "running_var": 1, "num_batches_tracked": 0}
)

// scriptNet is what a Net built from a TorchScript file runs.
type scriptNet struct {
	mod       *torch.ScriptModule
	path      string
	featNames []string // the body's parameters, then the buffers: what Features replaces
	fwdNames  []string // every parameter, then the buffers: what Forward replaces
	training  int      // the module's mode: 0 eval, 1 train, -1 not set yet
	dtype     torch.DType
	dev       torch.Device
}

// newTorchScript loads arch's file and checks the contract for inputs (c, h, w) and classes.
func newTorchScript(arch string, c, h, w, classes int64) (*Net, error) {
	path := strings.TrimPrefix(arch, TorchScriptPrefix)
	if path == "" {
		return nil, fmt.Errorf("nets: %q names no file (want torchscript:FILE)", arch)
	}
	mod, err := torch.LoadScriptModule(path)
	if err != nil {
		return nil, fmt.Errorf("nets: %w", err)
	}
	n, err := checkScript(mod, arch, path, c, h, w, classes)
	if err != nil {
		mod.Close()
		return nil, err
	}
	n.FileSHA256 = mod.SHA256()
	return n, nil
}

func checkScript(mod *torch.ScriptModule, arch, path string, c, h, w, classes int64) (*Net, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nets: torchscript %s: %s (%s)", path, fmt.Sprintf(format, args...), contract)
	}
	s := torch.NewScope()
	defer s.Close()
	if ok, err := mod.HasMethod("features"); err != nil {
		return nil, fmt.Errorf("nets: %w", err)
	} else if !ok {
		return nil, bad("no method features(x) (mark it @torch.jit.export when scripting)")
	}
	headType, err := mod.ModuleType("head")
	if err != nil {
		return nil, bad("no submodule head")
	}
	if headType != "torch.nn.modules.linear.Linear" {
		return nil, bad("head is a %s, not a torch.nn.modules.linear.Linear", headType)
	}
	params, err := mod.Parameters()
	if err != nil {
		return nil, fmt.Errorf("nets: %w", err)
	}
	buffers, err := mod.Buffers()
	if err != nil {
		return nil, fmt.Errorf("nets: %w", err)
	}
	shapes := map[string][]int64{}
	for _, p := range params {
		if !p.Tensor.DType().IsFloatingPoint() {
			return nil, fmt.Errorf("nets: torchscript %s: parameter %s is %v, not floating point", path, p.Name, p.Tensor.DType())
		}
		shapes[p.Name] = p.Tensor.Shape()
	}
	hw, okW := shapes["head.weight"]
	if _, okB := shapes["head.bias"]; !okW || !okB || len(hw) != 2 {
		return nil, bad("head must be an nn.Linear with a bias (head.weight and head.bias)")
	}
	if hw[0] != classes {
		return nil, fmt.Errorf("nets: torchscript %s: head has %d outputs, the data has %d classes", path, hw[0], classes)
	}
	d := hw[1]
	var body []ParamSpec
	var bodyNames []string
	for _, p := range params {
		if strings.HasPrefix(p.Name, "head.") {
			if p.Name != "head.weight" && p.Name != "head.bias" {
				return nil, bad("head has a parameter %s besides weight and bias", p.Name)
			}
			continue
		}
		spec, err := scriptSpec(p, shapes)
		if err != nil {
			return nil, fmt.Errorf("nets: torchscript %s: %w", path, err)
		}
		body = append(body, spec)
		bodyNames = append(bodyNames, p.Name)
	}
	var bufs []BufferSpec
	var bufNames []string
	for _, b := range buffers {
		_, leaf, _ := cutLast(b.Name)
		fill, known := statsFill[leaf]
		if !known || !slices.Contains(statsLayers, b.Owner) || strings.HasPrefix(b.Name, "head.") {
			continue // a constant of the module's own: used as the file has it
		}
		bufs = append(bufs, BufferSpec{Name: b.Name, Shape: b.Tensor.Shape(), Fill: fill})
		bufNames = append(bufNames, b.Name)
	}
	dtype := params[len(params)-1].Tensor.DType()
	sn := &scriptNet{mod: mod, path: path, training: -1, dtype: dtype, dev: torch.CPU}
	sn.featNames = append(slices.Clone(bodyNames), bufNames...)
	sn.fwdNames = append(append(slices.Clone(bodyNames), "head.weight", "head.bias"), bufNames...)
	n := &Net{Arch: arch, InShape: [3]int64{c, h, w}, Classes: classes, FeatureDim: d, Body: body, Buffers: bufs, script: sn}
	// the shim's own convolution and max-pool kernels, as nets' own networks run them,
	// before either method first runs (the probe)
	for _, method := range []string{"features", "forward"} {
		if _, err := mod.UseOwnKernels(method); err != nil {
			return nil, fmt.Errorf("nets: %w", err)
		}
	}
	if err := sn.probe(n, d, classes, bad); err != nil {
		return nil, err
	}
	return n, nil
}

// scriptSpec is the ParamSpec of one parameter from its owner's type: PyTorch's
// reset_parameters for the layers nets knows, an error for any other.
func scriptSpec(p torch.ScriptTensor, shapes map[string][]int64) (ParamSpec, error) {
	module, leaf, _ := cutLast(p.Name)
	shape := p.Tensor.Shape()
	spec := ParamSpec{Name: p.Name, Shape: shape}
	switch {
	case slices.Contains(fanInLayers, p.Owner) && (leaf == "weight" || leaf == "bias"):
		weight := shape
		if leaf == "bias" {
			w, ok := shapes[joinName(module, "weight")]
			if !ok {
				return spec, fmt.Errorf("bias %s has no weight beside it to take its fan-in from", p.Name)
			}
			weight = w
		}
		if len(weight) < 2 {
			return spec, fmt.Errorf("parameter %s: a %s weight of shape %v", p.Name, p.Owner, weight)
		}
		fan := weight[1]
		for _, k := range weight[2:] {
			fan *= k
		}
		spec.Init, spec.FanIn = InitUniformFanIn, fan
	case slices.Contains(normLayers, p.Owner) && leaf == "weight":
		spec.Init = InitOnes
	case slices.Contains(normLayers, p.Owner) && leaf == "bias":
		spec.Init = InitZeros
	default:
		return spec, fmt.Errorf("parameter %s belongs to %s, whose initialisation nets does not know "+
			"(it knows Conv1d/2d/3d, ConvTranspose1d/2d/3d and Linear: kaiming_uniform(a=√5) weights and U(±1/√fan_in) biases; "+
			"BatchNorm, InstanceNorm, LayerNorm and GroupNorm: weight 1, bias 0): hold every parameter in such a layer", p.Name, p.Owner)
	}
	return spec, nil
}

func joinName(module, leaf string) string {
	if module == "" {
		return leaf
	}
	return module + "." + leaf
}

// probe runs features and forward on batches of 2 and 5 of the data's shape with the
// module's own weights, in evaluation mode and without gradients, and checks their shapes
// and forward(x) = head(features(x)).
func (s *scriptNet) probe(n *Net, d, classes int64, bad func(string, ...any) error) error {
	c, h, w := n.InShape[0], n.InShape[1], n.InShape[2]
	if err := s.mod.Train(false); err != nil {
		return fmt.Errorf("nets: %w", err)
	}
	s.training = 0
	worked := int64(0)
	return torch.NoGrad(func() error {
		for _, b := range []int64{2, 5} {
			count := b * c * h * w
			x, err := torch.Arange(0, float64(count), 1, torch.WithDType(s.dtype))
			if err == nil {
				x, err = x.MulScalar(2 / float64(count))
			}
			if err == nil {
				x, err = x.SubScalar(1)
			}
			if err == nil {
				x, err = x.Reshape(b, c, h, w)
			}
			if err != nil {
				return fmt.Errorf("nets: torchscript %s: probe batch: %w", s.path, err)
			}
			f, err := s.mod.Run("features", x)
			var y *torch.Tensor
			if err == nil {
				y, err = s.mod.Run("forward", x)
			}
			if err != nil {
				msg := strings.TrimPrefix(err.Error(), "torch: script_call: "+s.path+": ")
				switch {
				case strings.Contains(msg, "CUDA") || strings.Contains(msg, "cuda"):
					return fmt.Errorf("nets: torchscript %s: it does not run on the CPU, only on CUDA? (a batch of %d: %s)", s.path, b, msg)
				case worked > 0:
					return fmt.Errorf("nets: torchscript %s: a batch of %d fails where one of %d works: traced with a fixed batch size? "+
						"(script it, or trace it without sizes that become constants): %s", s.path, b, worked, msg)
				}
				return fmt.Errorf("nets: torchscript %s: a probe batch of the data's shape (%d, %d, %d, %d) fails (another input size or channel count?): %s",
					s.path, b, c, h, w, msg)
			}
			if fs := f.Shape(); !slices.Equal(fs, []int64{b, d}) {
				return bad("features returns %v for a batch of %d, not (%d, %d) (head takes %d inputs)", fs, b, b, d, d)
			}
			if ys := y.Shape(); !slices.Equal(ys, []int64{b, classes}) {
				return bad("forward returns %v for a batch of %d, not (%d, %d)", ys, b, b, classes)
			}
			if err := s.checkHead(f, y); err != nil {
				return bad("%v", err)
			}
			worked = b
		}
		return nil
	})
}

// checkHead compares forward's output y with head(features) = f·Wᵀ + b (module's weights).
func (s *scriptNet) checkHead(f, y *torch.Tensor) error {
	params, err := s.mod.Parameters()
	if err != nil {
		return err
	}
	var hw, hb *torch.Tensor
	for _, p := range params {
		switch p.Name {
		case "head.weight":
			hw = p.Tensor
		case "head.bias":
			hb = p.Tensor
		}
	}
	want, err := torch.Linear(f, hw, hb)
	if err != nil {
		return err
	}
	a, err := y.Float64s()
	if err != nil {
		return err
	}
	b, err := want.Float64s()
	if err != nil {
		return err
	}
	worst, scale := 0.0, 1.0
	for i := range a {
		worst = math.Max(worst, math.Abs(a[i]-b[i]))
		scale = math.Max(scale, math.Abs(b[i]))
	}
	if !(worst <= 1e-4*scale) {
		return fmt.Errorf("forward(x) is not head(features(x)): they differ by %.3g on a probe batch", worst)
	}
	return nil
}

// call runs method with the given parameters (names: featNames or fwdNames, buffers last).
func (s *scriptNet) call(n *Net, method string, names []string, p, buf []*torch.Tensor, x *torch.Tensor, train bool, width int64) (*torch.Tensor, error) {
	if s.mod == nil {
		return nil, fmt.Errorf("nets: %s: the network was closed", n.Arch)
	}
	mode := 0
	if train {
		mode = 1
	}
	if s.training != mode {
		if err := s.mod.Train(train); err != nil {
			return nil, fmt.Errorf("nets: %w", err)
		}
		s.training = mode
	}
	if dt, dev := x.DType(), x.Device(); (dt != s.dtype || dev != s.dev) && dt.IsFloatingPoint() {
		if err := s.mod.To(dt, dev); err != nil {
			return nil, fmt.Errorf("nets: %w", err)
		}
		s.dtype, s.dev = dt, dev
	}
	vals := make([]*torch.Tensor, 0, len(names))
	vals = append(append(vals, p[:len(names)-len(buf)]...), buf...)
	y, err := s.mod.Call(method, names, vals, x)
	if err != nil {
		return nil, fmt.Errorf("nets: %w", err)
	}
	if ys, b := y.Shape(), x.Shape()[0]; !slices.Equal(ys, []int64{b, width}) {
		return nil, fmt.Errorf("nets: torchscript %s: %s returned %v for a batch of %d, not (%d, %d)", s.path, method, ys, b, b, width)
	}
	return y, nil
}

// Close frees what n holds outside Go: the module of a network from a TorchScript file
// (other networks hold nothing; Close is then a no-op). Copies of n (XavierInit) share the
// module. It is idempotent; n cannot run afterwards.
func (n *Net) Close() {
	if n == nil || n.script == nil || n.script.mod == nil {
		return
	}
	n.script.mod.Close()
	n.script.mod = nil
}

// BatchCoupled reports whether a batch's rows depend on each other in training mode: the
// network normalises with batch statistics (BatchNorm: ResNet, and TorchScript networks with
// running statistics), so a batch split over ranks does not give the whole batch's result.
func (n *Net) BatchCoupled() bool { return len(n.Buffers) > 0 }
