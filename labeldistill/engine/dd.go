package engine

// dd.go: method dd, Wang et al.'s dataset distillation (docs/ALGORITHM.md §12) on the
// meta-loop: the learnable "dd" (synthetic images and one learnt step size per unrolled
// step) and its meta-step, which trains a freshly initialised network through all the
// unrolled steps and differentiates the target loss back through them. The backward pass
// recomputes each step's graph from the stored parameters (the graph of one step at a time,
// and a copy of the parameters per step; dd_backward "recompute"), or keeps every step's
// graph as Wang et al.'s code does (dd_backward "graph": a graph per step).

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// ddData is method dd's learnable: N images (normalised space) and T = dd_steps × dd_epochs
// raw step sizes (step size = softplus(raw)), with one Adam over both whose learning rate
// is halved every config.DDDecayEpochs epochs.
type ddData struct {
	X        *torch.Tensor // (N, C, H, W), requires grad
	raw      *torch.Tensor // (T), requires grad
	y        *torch.Tensor // (N, classes) one-hot, no grad: image i's class (classes)
	classes  []int64
	opt      *torch.Adam
	lr       float64 // dd_lr, before the decay
	perEpoch int     // meta-steps per epoch, for the decay
	steps    int     // dd_steps: step t trains on images [k·(t mod steps), k·(t mod steps + 1))
}

// ddClasses is Wang et al.'s layout of n images over `steps` steps: each step's k = n/steps
// images hold k/classes images of each class, class by class ([0, 0, 1, 1, …] for two per
// class).
func ddClasses(n, steps, classes int) []int64 {
	k := n / steps
	per := k / classes
	out := make([]int64, n)
	for i := range out {
		out[i] = int64((i % k) / per)
	}
	return out
}

// ddBytesPerStep is what method dd keeps for each unrolled step of net at least: a copy
// of its float32 parameters, twice (0.4 MB measured for LeNet's 0.25 MB under recompute:
// the copies and the allocator's rounding; graph keeps the step's graph besides).
func ddBytesPerStep(net *nets.Net) int64 {
	var n int64
	for _, p := range net.Params() {
		size := int64(1)
		for _, d := range p.Shape {
			size *= d
		}
		n += size
	}
	return 2 * 4 * n
}

// physicalMemory is this machine's memory in bytes (0 when unknown).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// ddMemoryCheck refuses a T = dd_steps × dd_epochs whose unrolled steps would hold more
// than the machine's memory (mem bytes; 0: not checked) in copies of net's parameters,
// before anything is unrolled: the run would otherwise grow until the kernel kills it, or
// end in libtorch's bare std::bad_alloc under a memory limit. (On a GPU the parameters are
// the device's; its memory is smaller still, and CUDA names its own exhaustion.)
func ddMemoryCheck(net *nets.Net, cfg config.Config, mem int64) error {
	t := int64(cfg.DDUnrolledSteps())
	per := ddBytesPerStep(net)
	if mem <= 0 || t*per <= mem {
		return nil
	}
	return config.FieldErrorf("dd_epochs", "dd_steps × dd_epochs = %d × %d = %d unrolled steps each keep a copy of %s's parameters (at least %s a step under dd_backward %s): %s, more than this machine's %s of memory; lower dd_epochs or dd_steps",
		cfg.DDSteps, cfg.DDEpochs, t, cfg.Arch, byteSize(per), cfg.DDBackward, byteSize(t*per), byteSize(mem))
}

// byteSize writes a byte count for people: "494 KB", "4.9 GB".
func byteSize(n int64) string {
	v, units := float64(n), []string{"bytes", "KB", "MB", "GB", "TB"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if i == 0 || v >= 100 {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// ddOutOfMemory adds to an allocation failure of an unrolled step what to change: a bare
// std::bad_alloc (a memory limit reached) says nothing of method dd's T.
func ddOutOfMemory(err error, steps, unrolled int) error {
	if err == nil || !strings.Contains(err.Error(), "bad_alloc") {
		return err
	}
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return err
	}
	return config.FieldErrorf("dd_epochs", "out of memory (%v) in method dd's %d unrolled steps (dd_steps × dd_epochs = %d × %d, each keeping a copy of the network's parameters): lower dd_epochs or dd_steps, or raise the memory limit",
		err, unrolled, steps, unrolled/max(1, steps))
}

// softplusInverse is raw such that softplus(raw) = v (v > 0).
func softplusInverse(v float64) float64 { return math.Log(math.Expm1(v)) }

// newRunDD draws method dd's images from N(0, 1) (seed "dd-images") and sets every step
// size to dd_step_lr_init.
func newRunDD(in *Inputs) (*ddData, error) {
	cfg := in.cfg
	if err := ddMemoryCheck(in.net, cfg, physicalMemory()); err != nil {
		return nil, err
	}
	scope := torch.NewScope()
	defer scope.Close()
	x, err := drawBaseImages(in, "dd-images", torch.Randn)
	if err != nil {
		return nil, err
	}
	raw := make([]float64, cfg.DDUnrolledSteps())
	for i := range raw {
		raw[i] = softplusInverse(cfg.DDStepLRInit)
	}
	return newDD(x, raw, in.ds.Classes, cfg.DDSteps, cfg.DDLR, StepsPerEpoch(in.ds.TargetSet.N, cfg.OuterBatch))
}

// newDD learns a copy of the images x (their dtype and device) and the raw step sizes raw,
// the images laid out over `steps` steps (ddClasses).
func newDD(x *torch.Tensor, raw []float64, classes, steps int, lr float64, perEpoch int) (*ddData, error) {
	n := int(x.Shape()[0])
	if steps < 1 || n%steps != 0 || (n/steps)%classes != 0 || len(raw)%steps != 0 || len(raw) == 0 {
		return nil, fmt.Errorf("method dd: %d images cannot be laid out over %d steps of %d classes with %d step sizes", n, steps, classes, len(raw))
	}
	s := torch.NewScope()
	defer s.Close()
	v := &ddData{classes: ddClasses(n, steps, classes), lr: lr, perEpoch: max(1, perEpoch), steps: steps}
	onehot := make([]float64, n*classes)
	for i, c := range v.classes {
		onehot[i*classes+int(c)] = 1
	}
	var c torch.Chain
	v.X = c.T(c.T(x.Detach()).Clone())
	v.raw = c.T(c.T(c.T(torch.FromFloat64(raw, int64(len(raw)))).ToDType(x.DType())).To(x.Device()))
	v.y = c.T(c.T(c.T(torch.FromFloat64(onehot, int64(n), int64(classes))).ToDType(x.DType())).To(x.Device()))
	if c.Err() != nil {
		return nil, c.Err()
	}
	c.Check(v.X.SetRequiresGrad(true))
	c.Check(v.raw.SetRequiresGrad(true))
	if c.Err() != nil {
		return nil, c.Err()
	}
	torch.Escape(v.X, v.raw, v.y)
	opt, err := torch.NewAdam([]*torch.Tensor{v.X, v.raw}, torch.AdamOpts{LR: lr, Beta1: config.DDBeta1, Beta2: config.DDBeta2, Eps: 1e-8})
	if err != nil {
		v.close()
		return nil, err
	}
	v.opt = opt
	return v, nil
}

func (v *ddData) name() string { return "dd" }

func (v *ddData) params() []*torch.Tensor { return []*torch.Tensor{v.X, v.raw} }

// batch replaces the base examples idx (nil: all) by the images and their classes.
func (v *ddData) batch(idx, _, _ *torch.Tensor, detach bool) (*torch.Tensor, *torch.Tensor, error) {
	var c torch.Chain
	x, y := v.X, v.y
	if detach {
		x = c.T(x.Detach())
	}
	if idx != nil {
		x, y = c.T(x.IndexSelect(0, idx)), c.T(y.IndexSelect(0, idx))
	}
	return x, y, c.Err()
}

// step is one Adam step on the images and step sizes, at dd_lr halved every
// DDDecayEpochs epochs: epoch e (1-based) uses dd_lr · DDDecayFactor^⌊e / DDDecayEpochs⌋,
// as Wang et al.'s StepLR, stepped at the start of each epoch, gives.
func (v *ddData) step(grads []*torch.Tensor) error {
	epoch := int(v.opt.StepCount)/v.perEpoch + 1
	if err := v.opt.SetLR(v.lr * math.Pow(config.DDDecayFactor, float64(epoch/config.DDDecayEpochs))); err != nil {
		return err
	}
	if err := v.opt.StepWith(grads); err != nil {
		return fmt.Errorf("dd step: %w", err)
	}
	return nil
}

func (v *ddData) state() []namedTensor {
	return []namedTensor{{"dd.images", v.X}, {"dd.step_raw", v.raw},
		{"dd.images.exp_avg", v.opt.ExpAvg[0]}, {"dd.images.exp_avg_sq", v.opt.ExpAvgSq[0]},
		{"dd.step_raw.exp_avg", v.opt.ExpAvg[1]}, {"dd.step_raw.exp_avg_sq", v.opt.ExpAvgSq[1]}}
}

func (v *ddData) optimizers() []namedAdam { return []namedAdam{{"dd", v.opt}} }

func (v *ddData) close() {
	if v.opt != nil {
		v.opt.Close()
	}
	v.X.Free()
	v.raw.Free()
	v.y.Free()
}

// unrolled is T, the number of unrolled steps (and of fresh models' training steps).
func (v *ddData) unrolled() int { return int(v.raw.Shape()[0]) }

// stepSizes are the current step sizes softplus(raw), on the host.
func (v *ddData) stepSizes() ([]float32, error) {
	s := torch.NewScope()
	defer s.Close()
	var out []float32
	err := torch.NoGrad(func() error {
		lr, err := softplus(v.raw)
		if err != nil {
			return err
		}
		if lr, err = lr.ToDType(torch.Float); err != nil {
			return err
		}
		out, err = lr.Float32s()
		return err
	})
	return out, err
}

// schedule is the fixed training of fresh models with step sizes lrs (DDSchedule).
func (v *ddData) schedule(lrs []float32) *train.Schedule {
	return DDSchedule(len(v.classes), v.steps, lrs)
}

// DDSchedule is how method dd trains a fresh model on its n images with the step sizes
// lrs (docs/ALGORITHM.md §12): step t (1-based) is one plain gradient step of size
// lrs[t−1] on the k = n/steps images [k·b, k·(b+1)), b = (t−1) mod steps, in order.
func DDSchedule(n, steps int, lrs []float32) *train.Schedule {
	k := n / max(1, steps)
	sch := &train.Schedule{Batches: make([][]int64, steps), LRs: make([]float64, len(lrs))}
	for b := range sch.Batches {
		for i := 0; i < k; i++ {
			sch.Batches[b] = append(sch.Batches[b], int64(b*k+i))
		}
	}
	for i, lr := range lrs {
		sch.LRs[i] = float64(lr)
	}
	return sch
}

// softplus is PyTorch's softplus (β 1, threshold 20): log(1 + exp(r)), r itself above 20.
func softplus(r *torch.Tensor) (*torch.Tensor, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	capped := c.T(r.ClampMax(20))
	sp := c.T(c.T(c.T(capped.Exp()).AddScalar(1)).Log())
	out := c.T(torch.Where(c.T(r.GtScalar(20)), r, sp))
	if c.Err() != nil {
		return nil, c.Err()
	}
	s.Keep(out)
	return out, nil
}

// ddBlock is step t's (0-based) images and one-hot labels: block t mod steps of x and y.
func ddBlock(x, y *torch.Tensor, t, steps int) (*torch.Tensor, *torch.Tensor, error) {
	n := x.Shape()[0]
	k := n / int64(steps)
	start := int64(t%steps) * k
	var c torch.Chain
	xb := c.T(x.Narrow(0, start, k))
	yb := c.T(y.Narrow(0, start, k))
	return xb, yb, c.Err()
}

// ddMethod is method dd's meta-step on the learnable v, the network initialised afresh
// from gen at every step.
func ddMethod(v *ddData, gen func() *torch.Generator, backward string) metaMethod {
	return func(m *learner, b metaBatch) (stepOutputs, error) {
		if err := nets.Reinit(m.params, m.specs, gen()); err != nil {
			return stepOutputs{}, err
		}
		s := torch.NewScope()
		defer s.Close()
		unroll := ddRecompute
		if backward == config.DDGraph {
			unroll = ddGraph
		}
		grads, loss, wrong, err := unroll(m.net, m.params, v.X, v.y, v.raw, v.steps, b.xt, b.yt)
		if err != nil {
			return stepOutputs{}, noDoubleBackward(m.net, config.MethodDD, ddOutOfMemory(err, v.steps, v.unrolled()))
		}
		out, err := b.update(grads, loss, wrong)
		if err != nil {
			return stepOutputs{}, err
		}
		s.Keep(out.loss, out.wrong)
		return out, nil
	}
}

// ddUnroll computes method dd's target loss and its gradients with respect to the images
// x and the raw step sizes raw: from parameters theta, T = len(raw) plain gradient steps
// θ_{t+1} = θ_t − softplus(raw_t)·∇θ softCE(f(x_b; θ_t), y_b) on the blocks b = t mod
// steps of (x, y), then CE(f(xt; θ_T), yt). It returns [∂/∂x, ∂/∂raw], the loss and the
// number of wrong predictions, in the caller's scope.
type ddUnroll func(net *nets.Net, theta []*torch.Tensor, x, y, raw *torch.Tensor, steps int, xt, yt *torch.Tensor) (grads []*torch.Tensor, loss, wrong *torch.Tensor, err error)

// innerLoss is softCE(f(x; θ), y) of one unrolled step.
func innerLoss(net *nets.Net, theta []*torch.Tensor, x, y *torch.Tensor) (*torch.Tensor, error) {
	logits, err := net.Forward(theta, nil, x, true)
	if err != nil {
		return nil, err
	}
	return torch.SoftCrossEntropy(logits, y)
}

// leaves are detached copies of ts that require grad.
func leaves(ts []*torch.Tensor) ([]*torch.Tensor, error) {
	out := make([]*torch.Tensor, len(ts))
	for i, t := range ts {
		d, err := t.Detach()
		if err == nil {
			d, err = d.Clone()
		}
		if err == nil {
			err = d.SetRequiresGrad(true)
		}
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// targetLoss is CE(f(xt; θ), yt) and its wrong count.
func targetLoss(net *nets.Net, theta []*torch.Tensor, xt, yt *torch.Tensor) (loss, wrong *torch.Tensor, err error) {
	var c torch.Chain
	logits := c.T(net.Forward(theta, nil, xt, false))
	loss = c.T(torch.CrossEntropyInRange(logits, yt))
	wrong = c.T(train.WrongCount(logits, yt))
	return loss, wrong, c.Err()
}

// ddRecompute is ddUnroll with memory of one step: the forward pass keeps only θ_0..θ_T
// (no graph); the backward pass walks the steps from the last, rebuilding step t's graph
// from θ_t, and carries dθ = ∂L/∂θ_{t+1} back:
//
//	g_t = ∇θ softCE(f(x_b; θ_t), y_b)        (with its graph to θ_t and x)
//	∂L/∂lr_t = −⟨g_t, dθ⟩
//	∂L/∂x   += −lr_t · ∂⟨g_t, dθ⟩/∂x
//	dθ      ← dθ − lr_t · ∂⟨g_t, dθ⟩/∂θ_t   (a Hessian-vector product)
func ddRecompute(net *nets.Net, theta []*torch.Tensor, x, y, raw *torch.Tensor, steps int, xt, yt *torch.Tensor) ([]*torch.Tensor, *torch.Tensor, *torch.Tensor, error) {
	fail := func(err error) ([]*torch.Tensor, *torch.Tensor, *torch.Tensor, error) { return nil, nil, nil, err }
	T := int(raw.Shape()[0])
	var c torch.Chain
	var lrs []*torch.Tensor // lr_t, detached scalars
	c.Check(torch.NoGrad(func() error {
		all := c.T(softplus(raw))
		for t := 0; t < T; t++ {
			lrs = append(lrs, c.T(all.Select(0, int64(t))))
		}
		return c.Err()
	}))
	xd := c.T(x.Detach())
	if c.Err() != nil {
		return fail(c.Err())
	}
	// Forward: θ_0..θ_T, each step's graph dropped as soon as its gradient is taken.
	thetas := make([][]*torch.Tensor, T+1)
	var err error
	if thetas[0], err = leaves(theta); err != nil {
		return fail(err)
	}
	for t := 0; t < T; t++ {
		step := torch.NewScope()
		xb, yb, err := ddBlock(xd, y, t, steps)
		if err != nil {
			step.Close()
			return fail(err)
		}
		loss, err := innerLoss(net, thetas[t], xb, yb)
		var g []*torch.Tensor
		if err == nil {
			g, err = torch.Grad([]*torch.Tensor{loss}, thetas[t], torch.GradOpts{})
		}
		var next []*torch.Tensor
		if err == nil {
			err = torch.NoGrad(func() error {
				for i := range g {
					var sc torch.Chain
					next = append(next, sc.T(thetas[t][i].Sub(sc.T(g[i].Mul(lrs[t])))))
					if sc.Err() != nil {
						return sc.Err()
					}
				}
				return nil
			})
		}
		if err == nil {
			for _, p := range next {
				if err = p.SetRequiresGrad(true); err != nil {
					break
				}
			}
		}
		if err != nil {
			step.Close()
			return fail(fmt.Errorf("unrolled step %d: %w", t+1, err))
		}
		step.Keep(next...)
		step.Close()
		thetas[t+1] = next
	}
	loss, wrong, err := targetLoss(net, thetas[T], xt, yt)
	if err != nil {
		return fail(err)
	}
	dtheta, err := torch.Grad([]*torch.Tensor{loss}, thetas[T], torch.GradOpts{})
	if err != nil {
		return fail(err)
	}
	// Backward, from the last step.
	gx := c.T(torch.Zeros(x.Shape(), torch.WithDType(x.DType()), torch.OnDevice(x.Device())))
	glr := make([]*torch.Tensor, T)
	if c.Err() != nil {
		return fail(c.Err())
	}
	for t := T - 1; t >= 0; t-- {
		step := torch.NewScope()
		var sc torch.Chain
		xb, yb, err := ddBlock(x, y, t, steps) // with the graph to x
		sc.Check(err)
		var g []*torch.Tensor
		if sc.Err() == nil {
			inner, err := innerLoss(net, thetas[t], xb, yb)
			if err == nil {
				g, err = torch.Grad([]*torch.Tensor{inner}, thetas[t], torch.GradOpts{CreateGraph: true})
			}
			sc.Check(err)
		}
		var hv []*torch.Tensor
		if sc.Err() == nil {
			inputs := append(append([]*torch.Tensor{}, thetas[t]...), x)
			hv, err = torch.Grad(g, inputs, torch.GradOpts{GradOutputs: dtheta, AllowUnused: true})
			sc.Check(err)
		}
		if sc.Err() == nil {
			sc.Check(torch.NoGrad(func() error {
				var dot *torch.Tensor
				for i := range g {
					d := sc.T(sc.T(g[i].Mul(dtheta[i])).Sum())
					if dot != nil {
						d = sc.T(dot.Add(d))
					}
					dot = d
				}
				neg := sc.T(dot.Neg())
				if sc.Err() != nil {
					return sc.Err()
				}
				glr[t] = neg
				for i, h := range hv {
					if h == nil {
						continue
					}
					dst := gx
					if i < len(dtheta) {
						dst = dtheta[i]
					}
					if err := dst.AddScaled_(sc.T(h.Mul(lrs[t])), -1); err != nil {
						return err
					}
				}
				return sc.Err()
			}))
		}
		if sc.Err() != nil {
			step.Close()
			return fail(fmt.Errorf("unrolled step %d, backward: %w", t+1, sc.Err()))
		}
		step.Keep(glr[t])
		step.Close()
		torch.FreeAll(thetas[t+1]) // no longer needed
	}
	// ∂L/∂raw through softplus.
	gl := c.T(torch.Stack(glr, 0))
	lrAll := c.T(softplus(raw))
	if c.Err() != nil {
		return fail(c.Err())
	}
	graw, err := torch.Grad([]*torch.Tensor{lrAll}, []*torch.Tensor{raw}, torch.GradOpts{GradOutputs: []*torch.Tensor{gl}})
	if err != nil {
		return fail(err)
	}
	lossD := c.T(loss.Detach())
	return []*torch.Tensor{gx, graw[0]}, lossD, wrong, c.Err()
}

// ddGraph is ddUnroll as Wang et al.'s code computes it: every step's gradient graph is
// kept (create_graph) and the target loss is differentiated once; memory grows with T.
func ddGraph(net *nets.Net, theta []*torch.Tensor, x, y, raw *torch.Tensor, steps int, xt, yt *torch.Tensor) ([]*torch.Tensor, *torch.Tensor, *torch.Tensor, error) {
	fail := func(err error) ([]*torch.Tensor, *torch.Tensor, *torch.Tensor, error) { return nil, nil, nil, err }
	T := int(raw.Shape()[0])
	var c torch.Chain
	lrAll := c.T(softplus(raw))
	if c.Err() != nil {
		return fail(c.Err())
	}
	w, err := leaves(theta)
	if err != nil {
		return fail(err)
	}
	for t := 0; t < T; t++ {
		xb, yb, err := ddBlock(x, y, t, steps)
		if err != nil {
			return fail(err)
		}
		loss, err := innerLoss(net, w, xb, yb)
		var g []*torch.Tensor
		if err == nil {
			g, err = torch.Grad([]*torch.Tensor{loss}, w, torch.GradOpts{CreateGraph: true})
		}
		if err != nil {
			return fail(fmt.Errorf("unrolled step %d: %w", t+1, err))
		}
		lr := c.T(lrAll.Select(0, int64(t)))
		next := make([]*torch.Tensor, len(w))
		for i := range w {
			next[i] = c.T(w[i].Sub(c.T(g[i].Mul(lr))))
		}
		if c.Err() != nil {
			return fail(c.Err())
		}
		w = next
	}
	loss, wrong, err := targetLoss(net, w, xt, yt)
	if err != nil {
		return fail(err)
	}
	grads, err := torch.Grad([]*torch.Tensor{loss}, []*torch.Tensor{x, raw}, torch.GradOpts{})
	if err != nil {
		return fail(err)
	}
	return grads, c.T(loss.Detach()), wrong, c.Err()
}
