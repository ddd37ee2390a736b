package torch

// gradcheck_test.go: float64 central-difference checks of autograd for every differentiable
// op of the package, a gradient-of-gradient check for the nonlinear ones, and the
// double-backward check of label distillation: the label gradient through one SGD step of
// a small conv net, against finite differences of the whole procedure.

import (
	"math"
	"testing"
)

type gcCase struct {
	name   string
	inputs func(tb testing.TB) []*Tensor
	f      func(in []*Tensor) (*Tensor, error)
	tol    *gcTol
	gg     bool // also check the gradient of the gradient (nonlinear ops)
}

func un(f func(*Tensor) (*Tensor, error)) func([]*Tensor) (*Tensor, error) {
	return func(in []*Tensor) (*Tensor, error) { return f(in[0]) }
}

func bin(f func(a, b *Tensor) (*Tensor, error)) func([]*Tensor) (*Tensor, error) {
	return func(in []*Tensor) (*Tensor, error) { return f(in[0], in[1]) }
}

// avoid returns n normal samples pushed at least gap away from each of the points.
func avoid(seed uint64, n int, gap float64, points ...float64) []float64 {
	rng := newRNG(seed)
	v := make([]float64, n)
	for i := range v {
	again:
		x := rng.NormFloat64()
		for _, p := range points {
			if math.Abs(x-p) < gap {
				goto again
			}
		}
		v[i] = x
	}
	return v
}

// offsetPair returns a and b = a ± [0.2, 1) elementwise: maximum/minimum never tie.
func offsetPair(tb testing.TB, seed uint64, shape ...int64) []*Tensor {
	rng := newRNG(seed)
	n := numel(shape)
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i] = rng.NormFloat64()
		d := 0.2 + 0.8*rng.Float64()
		if rng.IntN(2) == 0 {
			d = -d
		}
		b[i] = a[i] + d
	}
	return []*Tensor{f64T(tb, a, shape...), f64T(tb, b, shape...)}
}

// wellConditioned returns n×n matrices A = 3·I + N(0, 0.3²).
func wellConditioned(tb testing.TB, seed uint64, n int64) *Tensor {
	rng := newRNG(seed)
	v := make([]float64, n*n)
	for i := range v {
		v[i] = 0.3 * rng.NormFloat64()
	}
	for i := int64(0); i < n; i++ {
		v[i*n+i] += 3
	}
	return f64T(tb, v, n, n)
}

func gcCases() []gcCase {
	rn := func(seed uint64, shape ...int64) func(testing.TB) []*Tensor {
		return func(tb testing.TB) []*Tensor { return []*Tensor{randnT(tb, newRNG(seed), shape...)} }
	}
	pos := func(seed uint64, shape ...int64) func(testing.TB) []*Tensor {
		return func(tb testing.TB) []*Tensor { return []*Tensor{uniformT(tb, newRNG(seed), 0.5, 2, shape...)} }
	}
	away := func(seed uint64, lo, hi float64, shape ...int64) func(testing.TB) []*Tensor {
		return func(tb testing.TB) []*Tensor { return []*Tensor{awayT(tb, newRNG(seed), lo, hi, shape...)} }
	}
	many := func(fs ...func(testing.TB) []*Tensor) func(testing.TB) []*Tensor {
		return func(tb testing.TB) []*Tensor {
			var out []*Tensor
			for _, f := range fs {
				out = append(out, f(tb)...)
			}
			return out
		}
	}
	p2 := func(a, b int64) [2]int64 { return [2]int64{a, b} }

	return []gcCase{
		// ---- unary
		{name: "neg", inputs: rn(1, 3, 4), f: un((*Tensor).Neg)},
		{name: "exp", inputs: rn(2, 3, 4), f: un((*Tensor).Exp), gg: true},
		{name: "log", inputs: pos(3, 3, 4), f: un((*Tensor).Log), gg: true},
		{name: "sqrt", inputs: pos(4, 3, 4), f: un((*Tensor).Sqrt), gg: true},
		{name: "abs", inputs: away(5, 0.1, 1.5, 3, 4), f: un((*Tensor).Abs)},
		{name: "relu", inputs: away(6, 0.1, 1.5, 3, 4), f: un((*Tensor).Relu)},
		{name: "relu_func", inputs: away(7, 0.1, 1.5, 2, 5), f: un(Relu)},
		{name: "sigmoid", inputs: rn(8, 3, 4), f: un((*Tensor).Sigmoid), gg: true},
		{name: "tanh", inputs: rn(9, 3, 4), f: un((*Tensor).Tanh), gg: true},
		{name: "square", inputs: rn(10, 3, 4), f: un((*Tensor).Square), gg: true},
		{name: "reciprocal", inputs: away(11, 0.5, 2, 3, 4), f: un((*Tensor).Reciprocal), gg: true},

		// ---- binary, with broadcasting
		{name: "add", inputs: many(rn(12, 3, 4), rn(13, 4)), f: bin((*Tensor).Add)},
		{name: "add_both_broadcast", inputs: many(rn(14, 3, 1), rn(15, 1, 4)), f: bin((*Tensor).Add)},
		{name: "sub", inputs: many(rn(16, 3, 1), rn(17, 3, 4)), f: bin((*Tensor).Sub)},
		{name: "mul", inputs: many(rn(18, 2, 3, 4), rn(19, 3, 1)), f: bin((*Tensor).Mul), gg: true},
		{name: "div", inputs: many(rn(20, 3, 4), away(21, 0.5, 2, 4)), f: bin((*Tensor).Div), gg: true},
		{name: "pow", inputs: many(pos(22, 3, 4), rn(23, 3, 1)), f: bin((*Tensor).Pow), gg: true},
		{name: "maximum", inputs: func(tb testing.TB) []*Tensor { return offsetPair(tb, 24, 3, 4) }, f: bin((*Tensor).Maximum)},
		{name: "minimum", inputs: func(tb testing.TB) []*Tensor { return offsetPair(tb, 25, 3, 4) }, f: bin((*Tensor).Minimum)},
		{name: "maximum_broadcast", inputs: func(tb testing.TB) []*Tensor {
			// a in [0, 1); b is -0.5 or 2: no ties, both sides win somewhere
			return []*Tensor{uniformT(tb, newRNG(26), 0, 1, 3, 4), f64T(tb, []float64{-0.5, 2, 2, -0.5}, 4)}
		}, f: bin((*Tensor).Maximum)},
		{name: "minimum_broadcast", inputs: func(tb testing.TB) []*Tensor {
			return []*Tensor{uniformT(tb, newRNG(27), 0, 1, 3, 4), f64T(tb, []float64{-0.5, 2, -0.5, 2}, 4)}
		}, f: bin((*Tensor).Minimum)},
		{name: "mm", inputs: many(rn(28, 3, 4), rn(29, 4, 5)), f: bin((*Tensor).Mm), gg: true},
		{name: "mm_func", inputs: many(rn(30, 2, 3), rn(31, 3, 2)), f: bin(Mm)},
		{name: "matmul_batched_broadcast", inputs: many(rn(32, 2, 3, 4), rn(33, 4, 5)), f: bin(Matmul), gg: true},
		{name: "matmul_vector", inputs: many(rn(34, 3, 4), rn(35, 4)), f: bin((*Tensor).Matmul)},
		{name: "matmul_batch_dims", inputs: many(rn(36, 2, 1, 3, 4), rn(37, 3, 4, 2)), f: bin((*Tensor).Matmul)},
		{name: "bmm", inputs: many(rn(38, 2, 3, 4), rn(39, 2, 4, 5)), f: bin(Bmm), gg: true},

		// ---- scalar forms
		{name: "add_scalar", inputs: rn(40, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.AddScalar(1.5) })},
		{name: "sub_scalar", inputs: rn(41, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.SubScalar(0.7) })},
		{name: "mul_scalar", inputs: rn(42, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.MulScalar(-2.5) })},
		{name: "div_scalar", inputs: rn(43, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.DivScalar(3) })},
		{name: "pow_scalar", inputs: pos(44, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.PowScalar(2.5) }), gg: true},
		{name: "pow_scalar_int", inputs: rn(45, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.PowScalar(3) }), gg: true},
		{name: "rsub_scalar", inputs: rn(46, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.RSubScalar(2) })},
		{name: "rdiv_scalar", inputs: away(47, 0.5, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.RDivScalar(2) }), gg: true},

		// ---- reductions
		{name: "sum_all", inputs: rn(50, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Sum() })},
		{name: "sum_dim", inputs: rn(51, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Sum(1) })},
		{name: "sum_dims", inputs: rn(52, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Sum(0, 2) })},
		{name: "sum_keepdim", inputs: rn(53, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.SumKeepDim(-1) })},
		{name: "mean_all", inputs: rn(54, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Mean() })},
		{name: "mean_dim", inputs: rn(55, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Mean(0) })},
		{name: "mean_dims", inputs: rn(56, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Mean(1, 2) })},
		{name: "mean_keepdim", inputs: rn(57, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.MeanKeepDim(1) })},
		{name: "amax_all", inputs: rn(58, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Amax() })},
		{name: "amax_dim", inputs: rn(59, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Amax(1) })},
		{name: "amin_dim", inputs: rn(60, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Amin(0) })},
		{name: "logsumexp", inputs: rn(61, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.LogSumExp(1) }), gg: true},
		{name: "logsumexp_dims", inputs: rn(62, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.LogSumExp(0, 2) })},
		{name: "prod_all", inputs: away(63, 0.5, 1.5, 2, 3), f: un(func(x *Tensor) (*Tensor, error) { return x.Prod() }), gg: true},
		{name: "prod_dim", inputs: away(64, 0.5, 1.5, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Prod(1) }), gg: true},

		// ---- clamp (inputs at least 0.05 from every bound)
		{name: "clamp", inputs: func(tb testing.TB) []*Tensor { return []*Tensor{f64T(tb, avoid(65, 12, 0.05, -0.5, 0.5), 3, 4)} },
			f: un(func(x *Tensor) (*Tensor, error) { return x.Clamp(-0.5, 0.5) })},
		{name: "clamp_min", inputs: func(tb testing.TB) []*Tensor { return []*Tensor{f64T(tb, avoid(66, 12, 0.05, 0.2), 3, 4)} },
			f: un(func(x *Tensor) (*Tensor, error) { return x.ClampMin(0.2) })},
		{name: "clamp_max", inputs: func(tb testing.TB) []*Tensor { return []*Tensor{f64T(tb, avoid(67, 12, 0.05, -0.1), 3, 4)} },
			f: un(func(x *Tensor) (*Tensor, error) { return x.ClampMax(-0.1) })},

		// ---- shapes and indexing
		{name: "reshape", inputs: rn(70, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Reshape(2, -1, 3) })},
		{name: "view", inputs: rn(71, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.View(4, 3) })},
		{name: "transpose", inputs: rn(72, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Transpose(0, 2) })},
		{name: "t", inputs: rn(73, 3, 4), f: un((*Tensor).T)},
		{name: "permute", inputs: rn(74, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Permute(2, 0, 1) })},
		{name: "cat_dim0", inputs: many(rn(75, 2, 3), rn(76, 1, 3)), f: func(in []*Tensor) (*Tensor, error) { return Cat(in, 0) }},
		{name: "cat_dim1", inputs: many(rn(77, 2, 3), rn(78, 2, 2), rn(79, 2, 1)), f: func(in []*Tensor) (*Tensor, error) { return Cat(in, 1) }},
		{name: "stack", inputs: many(rn(80, 2, 3), rn(81, 2, 3)), f: func(in []*Tensor) (*Tensor, error) { return Stack(in, 1) }},
		{name: "index_select", inputs: rn(82, 3, 4), f: func(in []*Tensor) (*Tensor, error) {
			idx, err := FromInt64On(in[0].Device(), []int64{2, 0, 2, 1, 2}, 5) // repeats accumulate in the backward pass
			if err != nil {
				return nil, err
			}
			return in[0].IndexSelect(0, idx)
		}},
		{name: "index_select_dim1", inputs: rn(83, 3, 4), f: func(in []*Tensor) (*Tensor, error) {
			idx, err := FromInt64On(in[0].Device(), []int64{3, 3, 0}, 3)
			if err != nil {
				return nil, err
			}
			return in[0].IndexSelect(1, idx)
		}},
		{name: "gather", inputs: rn(84, 3, 4), f: func(in []*Tensor) (*Tensor, error) {
			idx, err := FromInt64On(in[0].Device(), []int64{0, 3, 1, 1, 2, 0}, 3, 2)
			if err != nil {
				return nil, err
			}
			return in[0].Gather(1, idx)
		}},
		{name: "narrow", inputs: rn(85, 3, 5), f: un(func(x *Tensor) (*Tensor, error) { return x.Narrow(1, 1, 3) })},
		{name: "select", inputs: rn(86, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Select(0, 1) })},
		{name: "select_negative", inputs: rn(87, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Select(1, -1) })},
		{name: "expand", inputs: rn(88, 3, 1), f: un(func(x *Tensor) (*Tensor, error) { return x.Expand(2, 3, 4) })},
		{name: "unsqueeze", inputs: rn(89, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Unsqueeze(1) })},
		{name: "squeeze", inputs: rn(90, 3, 1, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Squeeze(1) })},
		{name: "flatten", inputs: rn(91, 2, 3, 4), f: un(func(x *Tensor) (*Tensor, error) { return x.Flatten(1, -1) })},
		{name: "contiguous", inputs: rn(92, 3, 4), f: un(func(x *Tensor) (*Tensor, error) {
			tr, err := x.T()
			if err != nil {
				return nil, err
			}
			return tr.Contiguous()
		})},
		{name: "clone", inputs: rn(93, 3, 4), f: un((*Tensor).Clone)},
		{name: "where", inputs: many(rn(94, 3, 4), rn(95, 3, 4)), f: func(in []*Tensor) (*Tensor, error) {
			cond, err := in[0].GtScalar(0)
			if err != nil {
				return nil, err
			}
			return Where(cond, in[0], in[1])
		}},

		// ---- linear algebra
		{name: "linalg_solve", inputs: func(tb testing.TB) []*Tensor {
			return []*Tensor{wellConditioned(tb, 100, 4), randnT(tb, newRNG(101), 4, 2)}
		}, f: bin(LinalgSolve), gg: true},
		{name: "linalg_solve_vector", inputs: func(tb testing.TB) []*Tensor {
			return []*Tensor{wellConditioned(tb, 102, 3), randnT(tb, newRNG(103), 3)}
		}, f: bin(LinalgSolve)},
		{name: "linalg_inv", inputs: func(tb testing.TB) []*Tensor { return []*Tensor{wellConditioned(tb, 104, 4)} },
			f: un(LinalgInv), gg: true},

		// ---- neural-network ops
		{name: "conv2d_groups2_stride2_pad1", inputs: many(rn(110, 2, 4, 7, 7), rn(111, 6, 2, 3, 3), rn(112, 6)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2d(in[0], in[1], in[2], Conv2dOpts{Stride: p2(2, 2), Padding: p2(1, 1), Groups: 2})
			}, gg: true},
		{name: "conv2d_nobias_dilation", inputs: many(rn(113, 1, 2, 7, 6), rn(114, 3, 2, 3, 2)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2d(in[0], in[1], nil, Conv2dOpts{Stride: p2(1, 2), Padding: p2(2, 0), Dilation: p2(2, 1)})
			}},
		// Conv2dDirect's own kernels (on CPUs with AVX2 and FMA; Conv2d elsewhere), first and
		// second order: every derivative comes from its three custom functions.
		{name: "conv2d_direct_pad2x1", inputs: many(rn(160, 2, 2, 7, 6), rn(161, 3, 2, 5, 5), rn(162, 3)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2dDirect(in[0], in[1], in[2], Conv2dOpts{Padding: p2(2, 1)})
			}, gg: true},
		{name: "conv2d_direct_nobias_pad0", inputs: many(rn(163, 3, 3, 6, 9), rn(164, 2, 3, 5, 5)),
			f: func(in []*Tensor) (*Tensor, error) { return Conv2dDirect(in[0], in[1], nil, Conv2dOpts{}) }, gg: true},
		{name: "conv2d_max_pool2x2_odd", inputs: many(rn(165, 2, 2, 8, 7), rn(166, 3, 2, 5, 5), rn(167, 3)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2dMaxPool2x2(in[0], in[1], in[2], Conv2dOpts{Padding: p2(1, 2)})
			}, gg: true},
		// The direct convolution fused with AlexCifarNet's pool (3, stride 2, padding 1), and
		// with one in ceil mode: every derivative through ConvMaxPool's backward.
		{name: "conv2d_max_pool2d_k3s2p1", inputs: many(rn(168, 2, 3, 9, 9), rn(169, 7, 3, 5, 5), rn(170, 7)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2dMaxPool2d(in[0], in[1], in[2], Conv2dOpts{Padding: p2(2, 2)},
					PoolOpts{Kernel: p2(3, 3), Stride: p2(2, 2), Padding: p2(1, 1)})
			}, gg: true},
		{name: "conv2d_max_pool2d_k2s3_ceil_nobias", inputs: many(rn(171, 1, 2, 8, 9), rn(172, 4, 2, 5, 5)),
			f: func(in []*Tensor) (*Tensor, error) {
				return Conv2dMaxPool2d(in[0], in[1], nil, Conv2dOpts{Padding: p2(1, 0)},
					PoolOpts{Kernel: p2(2, 3), Stride: p2(3, 2), CeilMode: true})
			}, gg: true},
		{name: "max_pool2d_k3s2p1", inputs: rn(115, 2, 3, 7, 7),
			f: un(func(x *Tensor) (*Tensor, error) {
				return MaxPool2d(x, PoolOpts{Kernel: p2(3, 3), Stride: p2(2, 2), Padding: p2(1, 1)})
			}), gg: true},
		{name: "max_pool2d_k2_ceil", inputs: rn(116, 1, 2, 7, 7),
			f: un(func(x *Tensor) (*Tensor, error) { return MaxPool2d(x, PoolOpts{Kernel: p2(2, 2), CeilMode: true}) })},
		{name: "max_pool2x2", inputs: rn(150, 2, 3, 6, 6), f: un(MaxPool2x2), gg: true},
		{name: "max_pool2x2_odd", inputs: rn(151, 1, 2, 7, 5), f: un(MaxPool2x2), gg: true},
		{name: "avg_pool2d_k2", inputs: rn(117, 2, 3, 6, 6),
			f: un(func(x *Tensor) (*Tensor, error) { return AvgPool2d(x, PoolOpts{Kernel: p2(2, 2)}) })},
		{name: "avg_pool2d_k3s2p1", inputs: rn(118, 1, 2, 7, 7),
			f: un(func(x *Tensor) (*Tensor, error) {
				return AvgPool2d(x, PoolOpts{Kernel: p2(3, 3), Stride: p2(2, 2), Padding: p2(1, 1)})
			})},
		{name: "avg_pool2d_count_include_pad_ceil", inputs: rn(119, 1, 2, 7, 7),
			f: un(func(x *Tensor) (*Tensor, error) {
				return AvgPool2d(x, PoolOpts{Kernel: p2(3, 3), Stride: p2(2, 2), Padding: p2(1, 1), CeilMode: true, CountIncludePad: true})
			})},
		{name: "adaptive_avg_pool2d", inputs: rn(120, 2, 3, 7, 5),
			f: un(func(x *Tensor) (*Tensor, error) { return AdaptiveAvgPool2d(x, 3, 2) })},
		{name: "adaptive_avg_pool2d_1x1", inputs: rn(121, 2, 3, 4, 4),
			f: un(func(x *Tensor) (*Tensor, error) { return AdaptiveAvgPool2d(x, 1, 1) })},
		{name: "batch_norm_training", inputs: many(rn(122, 4, 3, 3, 3), pos(123, 3), rn(124, 3)),
			f: func(in []*Tensor) (*Tensor, error) {
				// running statistics are updated in place: fresh ones per evaluation
				rm, err := Zeros([]int64{3}, WithDType(Double), OnDevice(in[0].Device()))
				if err != nil {
					return nil, err
				}
				rv, err := Ones([]int64{3}, WithDType(Double), OnDevice(in[0].Device()))
				if err != nil {
					return nil, err
				}
				return BatchNorm(in[0], in[1], in[2], rm, rv, BatchNormOpts{Training: true, Momentum: 0.1, Eps: 1e-5})
			}, gg: true},
		{name: "batch_norm_training_no_affine_no_stats", inputs: rn(125, 5, 2, 2),
			f: un(func(x *Tensor) (*Tensor, error) {
				return BatchNorm(x, nil, nil, nil, nil, BatchNormOpts{Training: true, Momentum: 0.1, Eps: 1e-5})
			})},
		{name: "batch_norm_eval", inputs: many(rn(126, 4, 3, 3, 3), pos(127, 3), rn(128, 3)),
			f: func(in []*Tensor) (*Tensor, error) {
				rm, err := fromFloat64On(in[0].Device(), []float64{0.3, -0.2, 0.1}, 3)
				if err != nil {
					return nil, err
				}
				rv, err := fromFloat64On(in[0].Device(), []float64{0.8, 1.5, 0.6}, 3)
				if err != nil {
					return nil, err
				}
				return BatchNorm(in[0], in[1], in[2], rm, rv, BatchNormOpts{Momentum: 0.1, Eps: 1e-5})
			}},
		{name: "local_response_norm", inputs: rn(129, 2, 6, 3, 3),
			f: un(func(x *Tensor) (*Tensor, error) { return LocalResponseNorm(x, 4, 0.5, 0.75, 1) }), gg: true},
		{name: "local_response_norm_3d", inputs: rn(130, 2, 5, 4),
			f: un(func(x *Tensor) (*Tensor, error) { return LocalResponseNorm(x, 3, 0.3, 0.75, 2) })},
		{name: "linear", inputs: many(rn(131, 4, 6), rn(132, 3, 6), rn(133, 3)), f: func(in []*Tensor) (*Tensor, error) {
			return Linear(in[0], in[1], in[2])
		}, gg: true},
		{name: "linear_nobias_3d", inputs: many(rn(134, 2, 4, 6), rn(135, 3, 6)), f: func(in []*Tensor) (*Tensor, error) {
			return Linear(in[0], in[1], nil)
		}},
		{name: "softmax", inputs: rn(136, 4, 5), f: un(func(x *Tensor) (*Tensor, error) { return Softmax(x, 1) }), gg: true},
		{name: "softmax_dim0", inputs: rn(137, 4, 5), f: un(func(x *Tensor) (*Tensor, error) { return Softmax(x, 0) })},
		{name: "log_softmax", inputs: rn(138, 4, 5), f: un(func(x *Tensor) (*Tensor, error) { return LogSoftmax(x, 1) }), gg: true},
		{name: "cross_entropy", inputs: rn(139, 6, 5), f: func(in []*Tensor) (*Tensor, error) {
			y, err := FromInt64On(in[0].Device(), []int64{0, 4, 2, 2, 1, 3}, 6)
			if err != nil {
				return nil, err
			}
			return CrossEntropy(in[0], y)
		}, gg: true},
		{name: "soft_cross_entropy", inputs: many(rn(140, 6, 5), pos(141, 6, 5)), f: bin(SoftCrossEntropy), gg: true},
		{name: "one_hot_to_float", inputs: rn(142, 4, 3), f: func(in []*Tensor) (*Tensor, error) {
			y, err := FromInt64On(in[0].Device(), []int64{2, 0, 1, 2}, 4)
			if err != nil {
				return nil, err
			}
			oh, err := OneHot(y, 3)
			if err != nil {
				return nil, err
			}
			ohf, err := oh.ToDType(Double)
			if err != nil {
				return nil, err
			}
			return in[0].Mul(ohf)
		}},
		{name: "to_dtype_roundtrip", inputs: rn(143, 3, 4), f: un(func(x *Tensor) (*Tensor, error) {
			return x.ToDType(Double) // same dtype: the identity, still in the graph
		})},
	}
}

// fromFloat64On is FromFloat64 on dev: the constants a case builds live where its inputs
// do, so that every case also runs on a GPU (TestDeviceGradChecks).
func fromFloat64On(dev Device, data []float64, shape ...int64) (*Tensor, error) {
	t, err := FromFloat64(data, shape...)
	if err != nil || dev == CPU {
		return t, err
	}
	return t.To(dev)
}

// weightsLike returns a fixed pseudo-random float64 tensor with entries in [-1, 1].
func weightsLike(shape []int64, seed uint64) (*Tensor, error) {
	rng := newRNG(seed)
	w := make([]float64, numel(shape))
	for i := range w {
		w[i] = 2*rng.Float64() - 1
	}
	return FromFloat64(w, shape...)
}

// gradOf turns f into the function inputs ↦ ∂(Σ f(inputs) ⊙ W′)/∂inputs, flattened and
// concatenated, computed with CreateGraph: gradCheck of it checks double backward.
func gradOf(f func([]*Tensor) (*Tensor, error)) func([]*Tensor) (*Tensor, error) {
	return func(in []*Tensor) (*Tensor, error) {
		var c Chain
		out := c.T(f(in))
		if c.Err() != nil {
			return nil, c.Err()
		}
		w := c.T(weightsLike(out.Shape(), 0xd0b1e))
		L := c.T(c.T(out.Mul(w)).Sum())
		if c.Err() != nil {
			return nil, c.Err()
		}
		gs, err := Grad([]*Tensor{L}, in, GradOpts{CreateGraph: true, AllowUnused: true})
		if err != nil {
			return nil, err
		}
		var flat []*Tensor
		for _, g := range gs {
			if g != nil {
				flat = append(flat, c.T(g.Flatten(0, -1)))
			}
		}
		if c.Err() != nil {
			return nil, c.Err()
		}
		return Cat(flat, 0)
	}
}

func TestGradCheckOps(t *testing.T) {
	scoped(t)
	for _, tc := range gcCases() {
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			tol := defaultGC
			if tc.tol != nil {
				tol = *tc.tol
			}
			gradCheckTol(t, tol, tc.f, tc.inputs(t)...)
		})
	}
	t.Logf("worst relative error |fd − autograd| / max|autograd|: %.3e (%s)", gcWorst.rel, gcWorst.name)
}

func TestGradGradCheckOps(t *testing.T) {
	n := 0
	for _, tc := range gcCases() {
		if !tc.gg {
			continue
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			gradCheck(t, gradOf(tc.f), tc.inputs(t)...)
		})
	}
	t.Logf("%d ops checked to second order", n)
}

// TestGradCheckHelperCatchesWrongGradient makes sure gradCheck is not vacuous: a function
// whose autograd gradient is deliberately wrong (a detached factor) must fail it.
func TestGradCheckHelperCatchesWrongGradient(t *testing.T) {
	scoped(t)
	x := randnT(t, newRNG(7), 3)
	wrong := func(in []*Tensor) (*Tensor, error) {
		d, err := in[0].Detach()
		if err != nil {
			return nil, err
		}
		return in[0].Mul(d) // true derivative 2x, autograd sees x
	}
	if bad := gradMismatches(t, defaultGC, wrong, x); len(bad) == 0 {
		t.Fatal("gradCheck accepted a wrong gradient")
	} else {
		t.Logf("as expected: %s", bad[0])
	}
}

// smallNet is conv(1→3, 3×3, pad 1) → relu → max_pool 2 → linear(3·4·4 → 3).
func smallNet(p []*Tensor, x *Tensor) (*Tensor, error) {
	var c Chain
	h := c.T(Conv2d(x, p[0], p[1], Conv2dOpts{Padding: [2]int64{1, 1}}))
	h = c.T(h.Relu())
	h = c.T(MaxPool2d(h, PoolOpts{Kernel: [2]int64{2, 2}}))
	h = c.T(h.Flatten(1, -1))
	h = c.T(Linear(h, p[2], p[3]))
	return h, c.Err()
}

// TestDoubleBackwardMetaStep checks the second-order label gradient of label
// distillation on a small conv net: inner soft cross-entropy of the base images against
// the labels L, one SGD step θ' = θ − α∇θ taken with CreateGraph, outer cross-entropy of
// θ' on other images; d outer / d(L, α) by autograd against central finite differences
// of the whole procedure.
func TestDoubleBackwardMetaStep(t *testing.T) {
	scoped(t)
	T := tensors(t)
	rng := newRNG(2024)
	shapes := [][]int64{{3, 1, 3, 3}, {3}, {3, 48}, {3}}
	theta := make([][]float64, len(shapes))
	for i, sh := range shapes {
		v := make([]float64, numel(sh))
		for j := range v {
			v[j] = 0.3 * rng.NormFloat64()
		}
		theta[i] = v
	}
	xb := randnT(t, rng, 4, 1, 8, 8)
	xt := randnT(t, rng, 6, 1, 8, 8)
	yt := i64T(t, []int64{0, 2, 1, 1, 0, 2}, 6)
	labels := uniformT(t, rng, 0.05, 1, 4, 3) // soft labels, used as given
	alpha := f64T(t, []float64{0.1})

	meta := func(in []*Tensor) (*Tensor, error) {
		var c Chain
		L, a := in[0], in[1]
		params := make([]*Tensor, len(shapes))
		for i, sh := range shapes {
			params[i] = c.T(FromFloat64(theta[i], sh...))
			if params[i] != nil {
				c.Check(params[i].SetRequiresGrad(true))
			}
		}
		inner := c.T(SoftCrossEntropy(c.T(smallNet(params, xb)), L))
		if c.Err() != nil {
			return nil, c.Err()
		}
		grads, err := Grad([]*Tensor{inner}, params, GradOpts{CreateGraph: true})
		if err != nil {
			return nil, err
		}
		fast := make([]*Tensor, len(params))
		for i := range params {
			fast[i] = c.T(params[i].Sub(c.T(grads[i].Mul(a))))
		}
		logits := c.T(smallNet(fast, xt))
		return c.T(CrossEntropy(logits, yt)), c.Err()
	}
	gradCheck(t, meta, labels, alpha)

	// The same gradient through the public path a training loop uses: Grad of the outer
	// loss with respect to the labels only.
	L := T(labels.Clone())
	L = T(L.Detach())
	ok(t, L.SetRequiresGrad(true))
	a := T(alpha.Detach())
	outer := T(meta([]*Tensor{L, a}))
	g := need[[]*Tensor](t)(Grad([]*Tensor{outer}, []*Tensor{L}, GradOpts{}))
	if g[0] == nil || !shapeEq(g[0].Shape(), []int64{4, 3}) || maxAbs(vals(t, g[0])) == 0 {
		t.Fatalf("label gradient %v is missing or zero", g[0])
	}
	t.Logf("outer loss %.6f, max |d outer/dL| %.3e", item(t, outer), maxAbs(vals(t, g[0])))
}
