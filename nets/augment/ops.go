package augment

// ops.go: the DSA operations on a batch x (N, C, H, W) with explicit per-image parameters
// (slices of length N), each a few differentiable torch ops in x's dtype and on its device.

import (
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/torch"
)

// check validates x as (N, C, H, W) and every parameter slice length as N.
func check(op string, x *torch.Tensor, lens ...int) ([]int64, error) {
	s := x.Shape()
	if x.Freed() {
		return nil, fmt.Errorf("augment: %s: %w", op, torch.ErrFreed)
	}
	if len(s) != 4 {
		return nil, fmt.Errorf("augment: %s: images must be (N, C, H, W), got %v", op, s)
	}
	if dt := x.DType(); dt != torch.Float && dt != torch.Double {
		return nil, fmt.Errorf("augment: %s: images must be float32 or float64, got %v", op, dt)
	}
	for _, n := range lens {
		if int64(n) != s[0] {
			return nil, fmt.Errorf("augment: %s: %d parameters for %d images", op, n, s[0])
		}
	}
	return s, nil
}

// inScope runs f in a scope of its own and keeps only its result.
func inScope(f func(ch *torch.Chain) *torch.Tensor) (*torch.Tensor, error) {
	s := torch.NewScope()
	defer s.Close()
	var ch torch.Chain
	out := f(&ch)
	if ch.Err() != nil {
		return nil, ch.Err()
	}
	s.Keep(out)
	return out, nil
}

// like copies host values of the given shape into a tensor of x's dtype on x's device.
func like(ch *torch.Chain, x *torch.Tensor, v []float64, shape ...int64) *torch.Tensor {
	t := ch.T(torch.FromFloat64(v, shape...))
	if ch.Err() != nil {
		return nil
	}
	if dt := x.DType(); dt != torch.Double {
		t = ch.T(t.ToDType(dt))
	}
	if dev := x.Device(); ch.Err() == nil && dev != torch.CPU {
		t = ch.T(t.To(dev))
	}
	return t
}

// perImage is v as a (N, 1, 1, 1) tensor that broadcasts over each image.
func perImage(ch *torch.Chain, x *torch.Tensor, v []float64) *torch.Tensor {
	return like(ch, x, v, int64(len(v)), 1, 1, 1)
}

// Flip mirrors image i left–right (along W) where flip[i].
func Flip(x *torch.Tensor, flip []bool) (*torch.Tensor, error) {
	s, err := check("flip", x, len(flip))
	if err != nil {
		return nil, err
	}
	w := s[3]
	rev := make([]int64, w)
	for j := range rev {
		rev[j] = w - 1 - int64(j)
	}
	f := make([]float64, len(flip))
	for i, b := range flip {
		if b {
			f[i] = 1
		}
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		idx := ch.T(torch.FromInt64On(x.Device(), rev, w))
		if ch.Err() != nil {
			return nil
		}
		mirrored := ch.T(x.IndexSelect(3, idx))
		cond := ch.T(perImage(ch, x, f).GtScalar(0.5))
		if ch.Err() != nil {
			return nil
		}
		return ch.T(torch.Where(cond, mirrored, x))
	})
}

// affine samples x bilinearly through the affine maps theta (N·6 values, row-major 2×3 per
// image) from output to input positions in normalised coordinates (corners at ±1), reading
// zeros outside the image: F.grid_sample(x, F.affine_grid(θ, x.shape, align_corners=True),
// align_corners=True).
func affine(x *torch.Tensor, s []int64, theta []float64) (*torch.Tensor, error) {
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		th := like(ch, x, theta, s[0], 2, 3)
		if ch.Err() != nil {
			return nil
		}
		grid := ch.T(torch.AffineGrid(th, s, true))
		if ch.Err() != nil {
			return nil
		}
		return ch.T(torch.GridSample(x, grid, torch.GridSampleOpts{Mode: torch.GridBilinear, Padding: torch.GridZeros, AlignCorners: true}))
	})
}

// Scale resamples image i so that the output position (u, v) (normalised, u along the
// width) shows the input at (sx[i]·u, sy[i]·v): factors above 1 shrink the content, below
// 1 enlarge it. Bilinear, zeros outside.
func Scale(x *torch.Tensor, sx, sy []float64) (*torch.Tensor, error) {
	s, err := check("scale", x, len(sx), len(sy))
	if err != nil {
		return nil, err
	}
	theta := make([]float64, 0, 6*len(sx))
	for i := range sx {
		theta = append(theta, sx[i], 0, 0, 0, sy[i], 0)
	}
	return affine(x, s, theta)
}

// Rotate resamples image i so that the output position (u, v) (normalised, u along the
// width, v down the height) shows the input at (u·cos a − v·sin a, u·sin a + v·cos a),
// a = angle[i] in radians: the reference's rotation matrix. Bilinear, zeros outside.
func Rotate(x *torch.Tensor, angle []float64) (*torch.Tensor, error) {
	s, err := check("rotate", x, len(angle))
	if err != nil {
		return nil, err
	}
	theta := make([]float64, 0, 6*len(angle))
	for _, a := range angle {
		c, sn := math.Cos(a), math.Sin(a)
		theta = append(theta, c, -sn, 0, sn, c, 0)
	}
	return affine(x, s, theta)
}

// Brightness adds shift[i] to every value of image i.
func Brightness(x *torch.Tensor, shift []float64) (*torch.Tensor, error) {
	if _, err := check("brightness", x, len(shift)); err != nil {
		return nil, err
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		return ch.T(x.Add(perImage(ch, x, shift)))
	})
}

// Saturation scales each pixel's distance from its mean over the channels by factor[i]:
// (x − m)·f + m with m the channel mean at that pixel. For one channel m = x: no change.
func Saturation(x *torch.Tensor, factor []float64) (*torch.Tensor, error) {
	if _, err := check("saturation", x, len(factor)); err != nil {
		return nil, err
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		return spread(ch, x, ch.T(x.MeanKeepDim(1)), perImage(ch, x, factor))
	})
}

// Contrast scales image i's distance from its mean (over channels and positions) by
// factor[i]: (x − m)·f + m.
func Contrast(x *torch.Tensor, factor []float64) (*torch.Tensor, error) {
	if _, err := check("contrast", x, len(factor)); err != nil {
		return nil, err
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		return spread(ch, x, ch.T(x.MeanKeepDim(1, 2, 3)), perImage(ch, x, factor))
	})
}

// spread is (x − m)·f + m.
func spread(ch *torch.Chain, x, m, f *torch.Tensor) *torch.Tensor {
	return ch.T(ch.T(ch.T(x.Sub(m)).Mul(f)).Add(m))
}

// Color is DSA's color operation: Brightness, then Saturation, then Contrast.
func Color(x *torch.Tensor, shift, saturation, contrast []float64) (*torch.Tensor, error) {
	if _, err := check("color", x, len(shift), len(saturation), len(contrast)); err != nil {
		return nil, err
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		y := ch.T(Brightness(x, shift))
		if ch.Err() != nil {
			return nil
		}
		y = ch.T(Saturation(y, saturation))
		if ch.Err() != nil {
			return nil
		}
		return ch.T(Contrast(y, contrast))
	})
}

// Crop translates image i by whole pixels: output (r, c) is input (r + dh[i], c + dw[i]),
// zero where that falls outside the image (the reference pads and crops).
func Crop(x *torch.Tensor, dh, dw []int64) (*torch.Tensor, error) {
	s, err := check("crop", x, len(dh), len(dw))
	if err != nil {
		return nil, err
	}
	n, c, h, w := s[0], s[1], s[2], s[3]
	idx := make([]int64, n*h*w)
	mask := make([]float64, n*h*w)
	for i := int64(0); i < n; i++ {
		for r := int64(0); r < h; r++ {
			for q := int64(0); q < w; q++ {
				k := (i*h+r)*w + q
				rr, qq := r+dh[i], q+dw[i]
				if rr >= 0 && rr < h && qq >= 0 && qq < w {
					idx[k], mask[k] = rr*w+qq, 1
				}
			}
		}
	}
	return inScope(func(ch *torch.Chain) *torch.Tensor {
		ix := ch.T(torch.FromInt64On(x.Device(), idx, n, 1, h*w))
		if ch.Err() != nil {
			return nil
		}
		ix = ch.T(ix.Expand(n, c, h*w))
		flat := ch.T(x.Reshape(n, c, h*w))
		if ch.Err() != nil {
			return nil
		}
		y := ch.T(ch.T(flat.Gather(2, ix)).Reshape(n, c, h, w))
		if ch.Err() != nil {
			return nil
		}
		return ch.T(y.Mul(like(ch, x, mask, n, 1, h, w)))
	})
}

// Cutout zeroes in image i the sh×sw square whose rows are ch[i] − sh/2 … ch[i] − sh/2 +
// sh − 1 and columns cw[i] − sw/2 … (integer halves), clipped to the image.
func Cutout(x *torch.Tensor, ch, cw []int64, sh, sw int64) (*torch.Tensor, error) {
	s, err := check("cutout", x, len(ch), len(cw))
	if err != nil {
		return nil, err
	}
	if sh < 0 || sw < 0 {
		return nil, fmt.Errorf("augment: cutout: negative square %d×%d", sh, sw)
	}
	n, h, w := s[0], s[2], s[3]
	mask := make([]float64, n*h*w)
	for i := range mask {
		mask[i] = 1
	}
	for i := int64(0); i < n; i++ {
		r0, q0 := ch[i]-sh/2, cw[i]-sw/2
		for r := max(r0, 0); r < min(r0+sh, h); r++ {
			for q := max(q0, 0); q < min(q0+sw, w); q++ {
				mask[(i*h+r)*w+q] = 0
			}
		}
	}
	return inScope(func(c *torch.Chain) *torch.Tensor {
		return c.T(x.Mul(like(c, x, mask, n, 1, h, w)))
	})
}
