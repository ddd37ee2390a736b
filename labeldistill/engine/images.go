package engine

// images.go: synthetic images learnt in pixel space, the meta-loop's learnable "images"
// (docs/ALGORITHM.md §12, the paper's "Our DD" and "Our DD RR"): drawn uniformly in [0, 1],
// normalised with the dataset's normalisation before the model, so that the meta-gradient
// reaches the pixels through it, and moved by Adam with PyTorch's defaults, then clamped to
// [0, 1] after every step. The labels stay the base examples' fixed one-hot classes unless
// the labels are learnt too (learn "both").

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// Adam of learnt images: PyTorch's defaults, as the authors' image distillation uses.
const (
	imageLR    = 1e-3
	imageBeta1 = 0.9
	imageBeta2 = 0.999
	imageEps   = 1e-8
)

// pixelImages is the N×C×H×W table of learnt pixels with its optimizer.
type pixelImages struct {
	P         *torch.Tensor // (N, C, H, W), requires grad, in [0, 1]
	opt       *torch.Adam
	mean, std *torch.Tensor // (1, C, 1, 1): x = (p − mean[c]) / std[c]
}

// newRunImages draws the run's N images from their own generator (seed "images"), on the
// run's device, normalised with the run's normalisation.
func newRunImages(in *Inputs) (*pixelImages, error) {
	scope := torch.NewScope()
	defer scope.Close()
	p, err := drawBaseImages(in, "images", torch.Rand)
	if err != nil {
		return nil, err
	}
	return newPixelImages(p, in.cfg.NormMean, in.cfg.NormStd)
}

// drawBaseImages draws N images of the dataset's shape with draw (torch.Rand, torch.Randn)
// from a generator of their own (seed stream), on the run's device, in the caller's scope.
func drawBaseImages(in *Inputs, stream string, draw func([]int64, *torch.Generator, ...torch.Option) (*torch.Tensor, error)) (*torch.Tensor, error) {
	gen, err := torch.NewGenerator(train.Seed(in.seed, stream, 0))
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	s := in.ds.Shape
	var c torch.Chain
	x := c.T(toDevice(c.T(draw([]int64{int64(in.ds.Base.N), s[0], s[1], s[2]}, gen)), in.dev))
	return x, c.Err()
}

// newPixelImages learns a copy of the pixels p (N, C, H, W; its dtype and device), with
// per-channel normalisation mean and std.
func newPixelImages(p *torch.Tensor, mean, std []float64) (*pixelImages, error) {
	shape := p.Shape()
	if len(shape) != 4 || int(shape[1]) != len(mean) || len(mean) != len(std) {
		return nil, fmt.Errorf("learnt images: %v images for a normalisation of %d mean(s) and %d std(s)", shape, len(mean), len(std))
	}
	s := torch.NewScope()
	defer s.Close()
	v := &pixelImages{}
	var c torch.Chain
	v.P = c.T(c.T(p.Detach()).Clone())
	col := func(vals []float64) *torch.Tensor {
		return c.T(c.T(c.T(torch.FromFloat64(vals, 1, int64(len(vals)), 1, 1)).ToDType(p.DType())).To(p.Device()))
	}
	v.mean, v.std = col(mean), col(std)
	if c.Err() != nil {
		return nil, c.Err()
	}
	if err := v.P.SetRequiresGrad(true); err != nil {
		return nil, err
	}
	torch.Escape(v.P, v.mean, v.std)
	opt, err := torch.NewAdam([]*torch.Tensor{v.P}, torch.AdamOpts{LR: imageLR, Beta1: imageBeta1, Beta2: imageBeta2, Eps: imageEps})
	if err != nil {
		v.P.Free()
		v.mean.Free()
		v.std.Free()
		return nil, err
	}
	v.opt = opt
	return v, nil
}

func (v *pixelImages) name() string { return "images" }

func (v *pixelImages) params() []*torch.Tensor { return []*torch.Tensor{v.P} }

// batch replaces the base images idx (nil: all) by the learnt ones, normalised.
func (v *pixelImages) batch(idx, _, y *torch.Tensor, detach bool) (*torch.Tensor, *torch.Tensor, error) {
	var c torch.Chain
	p := v.P
	if detach {
		p = c.T(p.Detach())
	}
	if idx != nil {
		p = c.T(p.IndexSelect(0, idx))
	}
	x := c.T(c.T(p.Sub(v.mean)).Div(v.std))
	return x, y, c.Err()
}

// step applies one Adam step with the images' meta-gradient, then clamps them to [0, 1].
func (v *pixelImages) step(grads []*torch.Tensor) error {
	if err := v.opt.StepWith(grads); err != nil {
		return fmt.Errorf("image step: %w", err)
	}
	return torch.NoGrad(func() error { return v.P.Clamp_(0, 1) })
}

func (v *pixelImages) state() []namedTensor {
	return []namedTensor{{"images", v.P}, {"images.exp_avg", v.opt.ExpAvg[0]}, {"images.exp_avg_sq", v.opt.ExpAvgSq[0]}}
}

func (v *pixelImages) optimizers() []namedAdam { return []namedAdam{{"images", v.opt}} }

func (v *pixelImages) close() {
	v.opt.Close()
	v.P.Free()
	v.mean.Free()
	v.std.Free()
}
