// Package augment holds image augmentation for training evaluation models: DSA, the
// differentiable siamese augmentation of Zhao & Bilen (2021) with the parameters and the
// one-operation-per-batch strategy of the DD-Ranking benchmark's evaluator.
//
// It depends on the torch binding alone: augmentation transforms a batch of images and
// knows nothing of networks (nets) or of label distillation (labeldistill).
//
// Randomness is explicit: DSA.Apply and DSA.Draw take a *torch.Generator (a CPU stream with
// a seed), so the same seed gives the same draws on every run and device. A
// Draw holds one batch's operation and each image's parameters as plain Go values; the
// operations themselves (Flip, Rotate, Scale, Brightness, Saturation, Contrast, Crop,
// Cutout) take such parameters explicitly. Every operation is differentiable in the images
// (rotate and scale to first order only, see torch.GridSample) and keeps their dtype and
// device.
//
// Images are (N, C, H, W) with any channel count. For one channel (MNIST-like data) every
// operation means what the reference formulas give for C = 1: saturation scales each
// pixel's distance from the mean over its channels, which for one channel is the pixel
// itself, so saturation leaves a one-channel image unchanged (a grey image has no colour
// to saturate); the color operation then amounts to brightness followed by contrast.
//
// Against DD-Ranking's ddranking/aug/dsa.py (its evaluator builds DSA with seed −1): the
// random numbers come from the generator passed in, not from torch's global generator
// (there seeded from the clock, so runs differ); each parameter is drawn per image, as there with seed
// −1, and the siamese mode (one parameter set for the whole batch, used when matching
// real and synthetic batches) is not a switch: a Draw with equal entries expresses it;
// rotation and scale matrices are computed in float64 and converted to the images' dtype
// (the reference builds them in float32). Draw's integer parameters use the reference's
// ranges: crop shifts −s…s with s = int(side·Crop + 0.5), cutout centres 0…side (0…side−1
// for an odd square side) with the square's side int(side·Cutout + 0.5).
package augment

// dsa.go: the strategy (DSA, its defaults, the per-batch draw) and Draw.Apply.

import (
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/torch"
)

// Op is one DSA operation.
type Op int

// The operations a batch draws one of, in the order DD-Ranking lists them. OpColor is
// brightness, then saturation, then contrast.
const (
	OpScale Op = iota
	OpRotate
	OpFlip
	OpColor
	OpCrop
	OpCutout
)

// AllOps is DD-Ranking's default strategy: every operation, one drawn per batch.
var AllOps = []Op{OpScale, OpRotate, OpFlip, OpColor, OpCrop, OpCutout}

func (o Op) String() string {
	switch o {
	case OpScale:
		return "scale"
	case OpRotate:
		return "rotate"
	case OpFlip:
		return "flip"
	case OpColor:
		return "color"
	case OpCrop:
		return "crop"
	case OpCutout:
		return "cutout"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// DSA is the augmentation's strengths and strategy. The zero value is not useful: start
// from Default.
type DSA struct {
	Flip       float64 // probability that an image is mirrored left–right (0.5)
	Rotate     float64 // rotation angle drawn from U(−Rotate, Rotate) degrees (15)
	Saturation float64 // saturation factor drawn from U(0, Saturation) (2)
	Brightness float64 // brightness shift drawn from U(−Brightness/2, Brightness/2) (1)
	Contrast   float64 // contrast factor drawn from U(Contrast, Contrast + 1) (0.5)
	Scale      float64 // scale per axis drawn from U(1/Scale, Scale) (1.2)
	Crop       float64 // largest translation, a fraction of the side, rounded (0.125)
	Cutout     float64 // side of the zeroed square, a fraction of the side, rounded (0.5)
	Ops        []Op    // the operations one is drawn from per batch; nil means AllOps
}

// Default returns DD-Ranking's DSA parameters (those of Zhao & Bilen's ParamDiffAug):
// flip 0.5, rotate 15°, saturation 2, brightness 1, contrast 0.5, scale 1.2, crop 0.125,
// cutout 0.5, one of all six operations per batch.
func Default() DSA {
	return DSA{Flip: 0.5, Rotate: 15, Saturation: 2, Brightness: 1, Contrast: 0.5, Scale: 1.2, Crop: 0.125, Cutout: 0.5}
}

func (d DSA) ops() []Op {
	if d.Ops == nil {
		return AllOps
	}
	return d.Ops
}

// Draw is one batch's augmentation: the operation and each image's parameters. Only the
// fields of Op are set; each has one entry per image.
type Draw struct {
	Op Op

	Flip           []bool    // OpFlip: mirror the image left–right
	ScaleX, ScaleY []float64 // OpScale: see Scale
	Angle          []float64 // OpRotate: radians, see Rotate

	Brightness []float64 // OpColor: the shift added, see Brightness
	Saturation []float64 // OpColor: the factor, see Saturation
	Contrast   []float64 // OpColor: the factor, see Contrast

	ShiftH, ShiftW []int64 // OpCrop: the translation, see Crop

	CutH, CutW         []int64 // OpCutout: the square's centre, see Cutout
	CutSizeH, CutSizeW int64   // OpCutout: the square's sides
}

// uniforms draws n samples of U[0, 1) from g as float64.
func uniforms(g *torch.Generator, n int64) ([]float64, error) {
	t, err := torch.Rand([]int64{n}, g, torch.WithDType(torch.Double))
	if err != nil {
		return nil, err
	}
	defer t.Free()
	return t.Float64s()
}

// below maps u ∈ [0, 1) to an integer in [0, n).
func below(u float64, n int64) int64 {
	return min(int64(math.Floor(u*float64(n))), n-1)
}

// sideFraction is the reference's int(side·ratio + 0.5).
func sideFraction(side int64, ratio float64) int64 {
	return int64(float64(side)*ratio + 0.5)
}

// Draw draws one batch's augmentation for images of shape (N, C, H, W) from g: first the
// operation, uniformly among d's operations, then the operation's parameters, N values
// per parameter in the order of the Draw fields. g must not be nil (libtorch's default
// generator is not seeded explicitly).
func (d DSA) Draw(g *torch.Generator, shape []int64) (Draw, error) {
	if g == nil {
		return Draw{}, fmt.Errorf("augment: dsa: a generator is required")
	}
	if len(shape) != 4 || shape[0] < 1 || shape[2] < 1 || shape[3] < 1 {
		return Draw{}, fmt.Errorf("augment: dsa: images must be (N, C, H, W), got %v", shape)
	}
	ops := d.ops()
	if len(ops) == 0 {
		return Draw{}, fmt.Errorf("augment: dsa: no operations")
	}
	n, h, w := shape[0], shape[2], shape[3]
	u, err := uniforms(g, 1)
	if err != nil {
		return Draw{}, err
	}
	dr := Draw{Op: ops[below(u[0], int64(len(ops)))]}
	// draw returns k·n uniforms as k slices of n.
	draw := func(k int) ([][]float64, error) {
		u, err := uniforms(g, int64(k)*n)
		if err != nil {
			return nil, err
		}
		out := make([][]float64, k)
		for i := range out {
			out[i] = u[int64(i)*n : int64(i+1)*n]
		}
		return out, nil
	}
	each := func(u []float64, f func(float64) float64) []float64 {
		v := make([]float64, len(u))
		for i, x := range u {
			v[i] = f(x)
		}
		return v
	}
	ints := func(u []float64, lo, count int64) []int64 {
		v := make([]int64, len(u))
		for i, x := range u {
			v[i] = lo + below(x, count)
		}
		return v
	}
	switch dr.Op {
	case OpFlip:
		us, err := draw(1)
		if err != nil {
			return Draw{}, err
		}
		dr.Flip = make([]bool, n)
		for i, x := range us[0] {
			dr.Flip[i] = x < d.Flip
		}
	case OpScale:
		us, err := draw(2)
		if err != nil {
			return Draw{}, err
		}
		lo := 1 / d.Scale
		f := func(x float64) float64 { return x*(d.Scale-lo) + lo }
		dr.ScaleX, dr.ScaleY = each(us[0], f), each(us[1], f)
	case OpRotate:
		us, err := draw(1)
		if err != nil {
			return Draw{}, err
		}
		dr.Angle = each(us[0], func(x float64) float64 { return (x - 0.5) * 2 * d.Rotate / 180 * math.Pi })
	case OpColor:
		us, err := draw(3)
		if err != nil {
			return Draw{}, err
		}
		dr.Brightness = each(us[0], func(x float64) float64 { return (x - 0.5) * d.Brightness })
		dr.Saturation = each(us[1], func(x float64) float64 { return x * d.Saturation })
		dr.Contrast = each(us[2], func(x float64) float64 { return x + d.Contrast })
	case OpCrop:
		us, err := draw(2)
		if err != nil {
			return Draw{}, err
		}
		sh, sw := sideFraction(h, d.Crop), sideFraction(w, d.Crop)
		dr.ShiftH, dr.ShiftW = ints(us[0], -sh, 2*sh+1), ints(us[1], -sw, 2*sw+1)
	case OpCutout:
		us, err := draw(2)
		if err != nil {
			return Draw{}, err
		}
		dr.CutSizeH, dr.CutSizeW = sideFraction(h, d.Cutout), sideFraction(w, d.Cutout)
		// The reference's centres: 0..H for an even side, 0..H−1 for an odd one.
		dr.CutH, dr.CutW = ints(us[0], 0, h+1-dr.CutSizeH%2), ints(us[1], 0, w+1-dr.CutSizeW%2)
	default:
		return Draw{}, fmt.Errorf("augment: dsa: unknown operation %v", dr.Op)
	}
	return dr, nil
}

// Apply augments x with a fresh draw from g. x is (N, C, H, W), one draw for the batch, or
// (M, N, C, H, W), M batches (one per evaluation model) with a draw each, in order.
func (d DSA) Apply(g *torch.Generator, x *torch.Tensor) (*torch.Tensor, error) {
	s := x.Shape()
	switch len(s) {
	case 4:
		dr, err := d.Draw(g, s)
		if err != nil {
			return nil, err
		}
		return dr.Apply(x)
	case 5:
		sc := torch.NewScope()
		defer sc.Close()
		outs := make([]*torch.Tensor, s[0])
		for m := range outs {
			dr, err := d.Draw(g, s[1:])
			if err != nil {
				return nil, err
			}
			xm, err := x.Select(0, int64(m))
			if err == nil {
				outs[m], err = dr.Apply(xm)
			}
			if err != nil {
				return nil, err
			}
		}
		out, err := torch.Stack(outs, 0)
		if err != nil {
			return nil, err
		}
		sc.Keep(out)
		return out, nil
	}
	return nil, fmt.Errorf("augment: dsa: images must be (N, C, H, W) or (M, N, C, H, W), got %v", s)
}

// Apply runs the drawn operation on x (N, C, H, W).
func (dr Draw) Apply(x *torch.Tensor) (*torch.Tensor, error) {
	switch dr.Op {
	case OpFlip:
		return Flip(x, dr.Flip)
	case OpScale:
		return Scale(x, dr.ScaleX, dr.ScaleY)
	case OpRotate:
		return Rotate(x, dr.Angle)
	case OpColor:
		return Color(x, dr.Brightness, dr.Saturation, dr.Contrast)
	case OpCrop:
		return Crop(x, dr.ShiftH, dr.ShiftW)
	case OpCutout:
		return Cutout(x, dr.CutH, dr.CutW, dr.CutSizeH, dr.CutSizeW)
	}
	return nil, fmt.Errorf("augment: unknown operation %v", dr.Op)
}
