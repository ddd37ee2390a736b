package train

// head.go: the ridge-regression head of LD RR (docs/ALGORITHM.md §5), written once for the
// meta-step and every fresh model: the ridge solve in its Woodbury form, the
// pseudo-gradient step on W, the scaled logits; and the soft cross-entropy of models
// trained together.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// RidgeWeights returns W = Zᵀ (Z Zᵀ + λI)⁻¹ Y for Z (n, d+1) and Y (n, C): the ridge solution
// through an n×n linear system (n = N_i is far smaller than d+1), solved rather than
// inverted. The bias column of Z is regularised too, as in the reference. A singular system
// is an error (its check reads the solver's status back to the host).
func RidgeWeights(z, y *torch.Tensor, lambda float64) (*torch.Tensor, error) {
	w, info, err := RidgeSolve(z, y, lambda)
	if err != nil {
		return nil, err
	}
	defer info.Free()
	status, err := info.Item()
	if err != nil {
		return nil, err
	}
	if status != 0 {
		w.Free()
		return nil, fmt.Errorf("ridge solve: the system is singular (linalg_solve info %v)", status)
	}
	return w, nil
}

// RidgeSolve is RidgeWeights without the solve's error check (a host read): it
// returns the solve's status (info, 0 = solved) for the caller to read later. The same
// arithmetic, so the same W. Z and Y may also carry a leading model dimension ((M, n, d+1)
// and (M, n, C)): one batched solve, W_m from model m's own Z_m and Y_m (the matrix
// products are torch.Matmul, which is mm for matrices and bmm for stacks of them).
func RidgeSolve(z, y *torch.Tensor, lambda float64) (w, info *torch.Tensor, err error) {
	var c torch.Chain
	rank := int64(len(z.Shape()))
	zt := c.T(z.Transpose(rank-2, rank-1))
	n := z.Shape()[rank-2]
	eye := c.T(torch.Eye(n, torch.WithDType(z.DType()), torch.OnDevice(z.Device())))
	a := c.T(c.T(z.Matmul(zt)).Add(c.T(eye.MulScalar(lambda))))
	if c.Err() != nil {
		return nil, nil, c.Err()
	}
	sol, info, err := torch.LinalgSolveEx(a, y)
	if err != nil {
		return nil, nil, err
	}
	w = c.T(zt.Matmul(sol))
	return w, info, c.Err()
}

// PseudoStep returns (1 − α)·W + α·W_l, with W detached (it carries no graph).
func PseudoStep(w, wl *torch.Tensor, alpha float64) (*torch.Tensor, error) {
	var c torch.Chain
	out := c.T(c.T(w.MulScalar(1 - alpha)).Add(c.T(wl.MulScalar(alpha))))
	return out, c.Err()
}

// RRWeights is §5 steps 2–3, written once for the meta-step and every evaluation model:
// W_l by ridge regression of the labels y on the features z (with their bias column), then
// the pseudo-gradient step from the kept W. The solve's status is left unread in info (a
// failed solve shows as non-finite numbers later). Shapes as RidgeSolve.
func RRWeights(z, y, kept *torch.Tensor, cfg config.Config) (w, info *torch.Tensor, err error) {
	wl, info, err := RidgeSolve(z, y, cfg.RidgeLambda)
	if err != nil {
		return nil, nil, err
	}
	w, err = PseudoStep(kept, wl, cfg.RidgePseudoStep)
	return w, info, err
}

// RRLogits is s·Z·W: the RR head's training-time logits (scale s of shape (1), or (M, 1, 1)
// for stacks of models).
func RRLogits(z, w, scale *torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	out := c.T(c.T(z.Matmul(w)).Mul(scale))
	return out, c.Err()
}

// WithBias appends a column of ones: Z = [f, 1].
func WithBias(f *torch.Tensor) (*torch.Tensor, error) {
	s := f.Shape()
	ones, err := torch.Ones([]int64{s[0], 1}, torch.WithDType(f.DType()), torch.OnDevice(f.Device()))
	if err != nil {
		return nil, err
	}
	return torch.Cat([]*torch.Tensor{f, ones}, 1)
}

// batchedSoftCE is Σ_m mean_b Σ_c −p[m,b,c] log softmax(z[m,b,:])_c for logits and
// probabilities (M, B, C): the sum of the models' own soft cross-entropies, so model m's
// gradient is that of its own loss.
func batchedSoftCE(logits, probs *torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	ls := c.T(torch.LogSoftmax(logits, 2))
	out := c.T(c.T(c.T(c.T(c.T(probs.Mul(ls)).Sum(2)).Mean(1)).Sum()).Neg())
	return out, c.Err()
}

// WithBiasBatched appends a column of ones to features (M, B, d): Z = [f, 1] per model.
func WithBiasBatched(f *torch.Tensor) (*torch.Tensor, error) {
	s := f.Shape()
	ones, err := torch.Ones([]int64{s[0], s[1], 1}, torch.WithDType(f.DType()), torch.OnDevice(f.Device()))
	if err != nil {
		return nil, err
	}
	return torch.Cat([]*torch.Tensor{f, ones}, 2)
}
