package engine

// run.go: what a run works on, prepared once: the resolved config, the data resident on the
// device, the networks and the seed. Distill, the baselines, the gradient-variance
// measurement and the benchmarks start from it.

import (
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// Inputs is a run's inputs on its device.
type Inputs struct {
	cfg                            config.Config
	ds                             *Data
	dev                            torch.Device
	seed                           uint64
	net, evalNet                   *nets.Net // distillation and test architectures
	base, target, validation, test deviceSplit
	digest                         string      // dataDigest(ds), computed when first needed
	origin                         *BaseOrigin // where the base examples came from
}

// Setup checks the shim and the device of cfg (resolved) and applies its process-wide
// settings (libtorch's thread count, TF32), before any data is read.
func Setup(cfg config.Config) (torch.Device, error) {
	if err := torch.CheckABI(); err != nil {
		return torch.CPU, err
	}
	dev, err := torch.ParseDevice(cfg.Device)
	if err != nil {
		return torch.CPU, err
	}
	if dev.IsCUDA() && !torch.CUDAIsAvailable() {
		return torch.CPU, config.FieldErrorf("device", "%s requested but CUDA is not available in this libtorch", cfg.Device)
	}
	threads := cfg.Threads
	if threads <= 0 { // libtorch's default, applied to OpenBLAS too (torch.SetNumThreads)
		threads = torch.NumThreads()
	}
	if err := torch.SetNumThreads(threads); err != nil {
		return torch.CPU, err
	}
	if err := torch.SetAllowTF32(cfg.AllowTF32); err != nil {
		return torch.CPU, err
	}
	return dev, nil
}

// NewInputs checks the data ds against cfg (resolved) and takes it onto dev: a run's inputs,
// with origin, where its base examples came from.
func NewInputs(cfg config.Config, ds *Data, dev torch.Device, origin *BaseOrigin) (*Inputs, error) {
	if err := ds.Check(); err != nil {
		return nil, err
	}
	if ds.Base.N != cfg.BaseExamples {
		return nil, config.FieldErrorf("base_examples", "config asks for %d, the dataset holds %d", cfg.BaseExamples, ds.Base.N)
	}
	if len(cfg.NormMean) == 0 { // an image folder's, computed from its images: recorded
		cfg.NormMean, cfg.NormStd = ds.NormMean, ds.NormStd
	}
	d := &Inputs{cfg: cfg, ds: ds, dev: dev, seed: uint64(cfg.Seed), origin: origin}
	if err := d.upload(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// dataDigest is the SHA-256 of the data the run trains on (computed once).
func (d *Inputs) dataDigest() string {
	if d.digest == "" {
		d.digest = dataDigest(d.ds)
	}
	return d.digest
}

// networkSHA256 is Record.NetworkSHA256 of the run's networks (nil for built-in ones).
func (d *Inputs) networkSHA256() map[string]string {
	var m map[string]string
	for _, n := range []*nets.Net{d.net, d.evalNet} {
		if n != nil && n.FileSHA256 != "" {
			if m == nil {
				m = map[string]string{}
			}
			m[n.Arch] = n.FileSHA256
		}
	}
	return m
}

// upload builds the networks and puts every split on the device.
func (d *Inputs) upload() error {
	var err error
	shape, classes := d.ds.Shape, int64(d.ds.Classes)
	if d.net, err = nets.New(d.cfg.Arch, shape[0], shape[1], shape[2], classes); err != nil {
		return err
	}
	if d.evalNet, err = nets.New(d.cfg.EvalArch, shape[0], shape[1], shape[2], classes); err != nil {
		return err
	}
	for _, s := range []struct {
		dst *deviceSplit
		src *data.Split
	}{{&d.base, &d.ds.Base}, {&d.target, &d.ds.TargetSet}, {&d.validation, &d.ds.Validation}, {&d.test, &d.ds.Test}} {
		if *s.dst, err = upload(s.src, shape, d.dev); err != nil {
			return err
		}
	}
	return nil
}

func (d *Inputs) close() {
	for _, s := range []deviceSplit{d.base, d.target, d.validation, d.test} {
		s.free()
	}
	d.net.Close()
	d.evalNet.Close()
}

// rr reports whether the run's method is LD RR.
func (d *Inputs) rr() bool { return d.cfg.Method == config.MethodRR }

// evalTrainer trains fresh models of net on the base images x and the label table y with
// the run's evaluation recipe (Adam at eval_lr, eval_batch examples per step).
func (d *Inputs) evalTrainer(net *nets.Net, x, y *torch.Tensor) *train.Trainer {
	return &train.Trainer{Net: net, RR: d.rr(), Cfg: d.cfg, Images: x, Labels: y, Batch: d.cfg.EvalBatch, Opt: train.AdamSpec(d.cfg.EvalLR), Device: d.dev}
}

// Config is the run's resolved configuration; Data its data; Device where it runs; Seed
// its seed; Net the distillation network.
func (d *Inputs) Config() config.Config { return d.cfg }
func (d *Inputs) Data() *Data           { return d.ds }
func (d *Inputs) Device() torch.Device  { return d.dev }
func (d *Inputs) Seed() uint64          { return d.seed }
func (d *Inputs) Net() *nets.Net        { return d.net }

// BaseImages are the base examples' images on the device; Target the target set's images
// and labels.
func (d *Inputs) BaseImages() *torch.Tensor              { return d.base.x }
func (d *Inputs) Target() (images, labels *torch.Tensor) { return d.target.x, d.target.y }

// Close frees the inputs' tensors.
func (d *Inputs) Close() { d.close() }
