package train

// epochs_test.go: the epoch trainer's pieces: the step schedule and the validation epochs,
// SGD's weight decay and schedule against torch.optim.SGD's formula, the best-validation
// epoch and the parameters kept from it, per-model training sets, augmentation, and the
// same seeds giving the same models.

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
)

// StepLR: DD-Ranking's schedule (1000 epochs, ×0.1 after 500) and the chained product
// torch.optim.lr_scheduler.StepLR computes.
func TestStepLR(t *testing.T) {
	s := StepLR{LR: 0.05, StepSize: 500, Gamma: 0.1}
	want := func(e int) float64 {
		lr := 0.05
		for k := 500; k <= e; k += 500 {
			lr = lr * 0.1
		}
		return lr
	}
	for _, e := range []int{0, 1, 499, 500, 501, 999, 1000, 1499, 1500} {
		if got := s.At(e); got != want(e) {
			t.Errorf("At(%d) = %v, want %v", e, got, want(e))
		}
	}
	if lr, g := 0.05, 0.1; s.At(499) != lr || s.At(500) != lr*g {
		t.Errorf("decay at the wrong epoch: %v, %v", s.At(499), s.At(500))
	}
	if got := (StepLR{LR: 0.01}).At(700); got != 0.01 {
		t.Errorf("no step size: %v, want a constant 0.01", got)
	}
	r := EpochRecipe{Epochs: 1000, ValidateEvery: 20}
	if c := r.Checks(); len(c) != 50 || c[0] != 20 || c[49] != 1000 {
		t.Errorf("checks of 1000 epochs every 20: %v", c)
	}
	r = EpochRecipe{Epochs: 45, ValidateEvery: 20}
	if c := r.Checks(); !slices.Equal(c, []int{20, 40, 45}) {
		t.Errorf("checks of 45 epochs every 20: %v, want [20 40 45] (the last always)", c)
	}
	if c := (EpochRecipe{Epochs: 2, ValidateEvery: 20}).Checks(); !slices.Equal(c, []int{2}) {
		t.Errorf("checks of 2 epochs every 20: %v, want [2]", c)
	}
	ok := EpochRecipe{Epochs: 2, Batch: 256, Schedule: StepLR{LR: 0.01}, Momentum: 0.9, WeightDecay: 5e-4, ValidateEvery: 20}
	if err := ok.Check(); err != nil {
		t.Errorf("a constant rate: %v", err)
	}
	for name, mod := range map[string]func(*EpochRecipe){
		"epochs":       func(r *EpochRecipe) { r.Epochs = 0 },
		"batch":        func(r *EpochRecipe) { r.Batch = 0 },
		"lr":           func(r *EpochRecipe) { r.Schedule.LR = math.NaN() },
		"gamma":        func(r *EpochRecipe) { r.Schedule.StepSize, r.Schedule.Gamma = 1, 0 },
		"momentum":     func(r *EpochRecipe) { r.Momentum = 1 },
		"weight decay": func(r *EpochRecipe) { r.WeightDecay = -1e-4 },
		"validate":     func(r *EpochRecipe) { r.ValidateEvery = 0 },
	} {
		r := ok
		mod(&r)
		if r.Check() == nil {
			t.Errorf("%s: %+v accepted", name, r)
		}
	}
}

// The SGD the recipe builds (momentum 0.9, weight decay 5e-4) with the learning rate
// changed between steps, as the schedule does, against torch.optim.SGD's update in
// float64: d = g + λθ; b = d at the first step, else μb + d; θ ← θ − lr·b.
func TestSGDWeightDecayAndScheduleFormula(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	theta := []float64{0.8, -1.5, 0.25, 3}
	p, err := torch.FromFloat64(theta, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetRequiresGrad(true); err != nil {
		t.Fatal(err)
	}
	const mu, wd = 0.9, 5e-4
	opt, err := NewOptimizer(OptSpec{Kind: "sgd", LR: 0.1, Momentum: mu, WeightDecay: wd}, config.Default(), []*torch.Tensor{p})
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	sched := StepLR{LR: 0.1, StepSize: 2, Gamma: 0.1}
	grads := [][]float64{{0.3, -0.2, 0.1, 0.05}, {-0.4, 0.6, 0.0, 1.2}, {0.2, 0.2, -0.7, 0.3}, {1, -1, 0.5, 0}}
	want, plain := slices.Clone(theta), slices.Clone(theta) // plain: the same SGD without weight decay
	buf, plainBuf := make([]float64, 4), make([]float64, 4)
	for step, g := range grads {
		lr := sched.At(step)
		if err := opt.SetLR(lr); err != nil {
			t.Fatal(err)
		}
		gt, err := torch.FromFloat64(g, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := opt.StepWith([]*torch.Tensor{gt}); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			d := g[i] + wd*want[i]
			if step == 0 {
				buf[i], plainBuf[i] = d, g[i]
			} else {
				buf[i], plainBuf[i] = mu*buf[i]+d, mu*plainBuf[i]+g[i]
			}
			want[i] -= lr * buf[i]
			plain[i] -= lr * plainBuf[i]
		}
	}
	got, err := p.Float64s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("θ = %v, torch.optim.SGD's formula gives %v", got, want)
		}
	}
	// Without weight decay the same steps end elsewhere: the decay was applied.
	if math.Abs(got[3]-plain[3]) < 1e-4 {
		t.Errorf("θ = %v is where SGD without weight decay ends, %v", got, plain)
	}
}

// blobs: n images 1×28×28 of 3 classes (a bright band whose row depends on the class, and
// noise) with one-hot labels.
func blobs(t *testing.T, n int, seed uint64) (x, onehot, y *torch.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	img := make([]float32, n*28*28)
	lab := make([]float32, n*3)
	cls := make([]int64, n)
	for i := 0; i < n; i++ {
		c := i % 3
		cls[i], lab[i*3+c] = int64(c), 1
		for p := 0; p < 28*28; p++ {
			v := float32(rng.NormFloat64() * 0.8)
			if r := p / 28; r >= 4+8*c && r < 8+8*c {
				v += 1.5
			}
			img[i*28*28+p] = v
		}
	}
	var c torch.Chain
	x = c.T(torch.FromFloat32(img, int64(n), 1, 28, 28))
	onehot = c.T(torch.FromFloat32(lab, int64(n), 3))
	y = c.T(torch.FromInt64(cls, int64(n)))
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	return x, onehot, y
}

func epochTrainer(t *testing.T, x, labels *torch.Tensor, r EpochRecipe) *EpochTrainer {
	t.Helper()
	net, err := nets.New("lenet", 1, 28, 28, 3)
	if err != nil {
		t.Fatal(err)
	}
	return &EpochTrainer{Net: net, Cfg: config.Default(), Images: x, Labels: labels, Recipe: r, Device: torch.CPU}
}

func params(t *testing.T, l *Models, i int) []float32 {
	t.Helper()
	var out []float32
	for _, p := range l.Params[i] {
		v, err := p.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v...)
	}
	return out
}

// The kept epoch is the first with the highest validation accuracy, and the models come
// back with that epoch's parameters: scoring them again gives that accuracy. The same seeds
// train the same models; with augmentation the models differ.
func TestEpochTrainerKeepsBestValidation(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	x, labels, _ := blobs(t, 60, 1)
	vx, _, vy := blobs(t, 90, 2)
	r := EpochRecipe{Epochs: 6, Batch: 16, Schedule: StepLR{LR: 0.05, StepSize: 3, Gamma: 0.1}, Momentum: 0.9, WeightDecay: 5e-4, ValidateEvery: 2}
	seeds := []uint64{11, 12}
	train := func(r EpochRecipe) *EpochResult {
		res, err := epochTrainer(t, x, labels, r).Train(context.Background(), seeds, vx, vy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(res.Models.Close)
		return res
	}
	res := train(r)
	if !slices.Equal(res.Checks, []int{2, 4, 6}) || len(res.Curve) != 3 {
		t.Fatalf("checks %v, %d curve points", res.Checks, len(res.Curve))
	}
	again, err := res.Models.Accuracies(context.Background(), vx, vy)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seeds {
		best := 0
		for k := range res.Curve {
			if res.Curve[k][i] > res.Curve[best][i] {
				best = k
			}
		}
		if res.Epoch[i] != res.Checks[best] || res.Validation[i] != res.Curve[best][i] || res.Diverged[i] {
			t.Errorf("model %d: kept epoch %d (%.2f%%), curve %v", i, res.Epoch[i], res.Validation[i], res.Curve)
		}
		if again[i] != res.Validation[i] {
			t.Errorf("model %d: restored parameters score %.2f%%, the kept check %.2f%%", i, again[i], res.Validation[i])
		}
		if res.Validation[i] < 60 {
			t.Errorf("model %d reaches %.2f%% on an easy 3-class task", i, res.Validation[i])
		}
	}
	rerun := train(r)
	for i := range seeds {
		if !slices.Equal(params(t, res.Models, i), params(t, rerun.Models, i)) || !slices.Equal(res.Curve[2], rerun.Curve[2]) {
			t.Errorf("model %d: the same seeds gave other models", i)
		}
	}
	dsa := augment.Default()
	r.Augment = &dsa
	aug := train(r)
	aug2 := train(r)
	if slices.Equal(params(t, res.Models, 0), params(t, aug.Models, 0)) {
		t.Errorf("augmentation changed nothing")
	}
	if !slices.Equal(params(t, aug.Models, 1), params(t, aug2.Models, 1)) {
		t.Errorf("augmented training is not reproducible from its seeds")
	}
}

// PerModel: model i trains on its own block of the images, exactly as a model trained on
// that block alone.
func TestEpochTrainerPerModelSets(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	x, labels, _ := blobs(t, 40, 3)
	vx, _, vy := blobs(t, 30, 4)
	r := EpochRecipe{Epochs: 2, Batch: 8, Schedule: StepLR{LR: 0.01, StepSize: 1, Gamma: 0.1}, Momentum: 0.9, WeightDecay: 5e-4, ValidateEvery: 1}
	et := epochTrainer(t, x, labels, r)
	et.PerModel = true
	both, err := et.Train(context.Background(), []uint64{5, 6}, vx, vy)
	if err != nil {
		t.Fatal(err)
	}
	defer both.Models.Close()
	var c torch.Chain
	x1, l1 := c.T(x.Narrow(0, 20, 20)), c.T(labels.Narrow(0, 20, 20))
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	alone, err := epochTrainer(t, x1, l1, r).Train(context.Background(), []uint64{6}, vx, vy)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Models.Close()
	if !slices.Equal(params(t, both.Models, 1), params(t, alone.Models, 0)) {
		t.Errorf("model 1 of a per-model pair differs from the same model trained on its block alone")
	}
	et.Images = c.T(x.Narrow(0, 0, 39))
	et.Labels = c.T(labels.Narrow(0, 0, 39))
	if _, err := et.Train(context.Background(), []uint64{5, 6}, vx, vy); err == nil {
		t.Errorf("39 images split into 2 training sets: no error")
	}
}

// The training loss on soft labels is DD-Ranking's SoftCrossEntropyLoss at temperature 1
// with the labels read as logits: theirs is Σ −log_softmax(z/T)·softmax(t/T) / B for student
// logits z and label logits t; our probability rows p are the logits t = log p (softmax(log p)
// = p, zero entries −∞), so at T = 1 both losses are the same function. Computed here in
// float64 Go arithmetic, rows with zeros included.
func TestSoftCEIsDDRankingsAtTemperatureOne(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	const b, c = 5, 4
	rng := rand.New(rand.NewPCG(3, 4))
	z := make([]float64, b*c)
	p := make([]float64, b*c)
	for i := 0; i < b; i++ {
		var sum float64
		for j := 0; j < c; j++ {
			z[i*c+j] = rng.NormFloat64() * 2
			if (i+j)%3 != 0 { // some zeros
				p[i*c+j] = rng.Float64()
			}
			sum += p[i*c+j]
		}
		for j := 0; j < c; j++ {
			p[i*c+j] /= sum
		}
	}
	ddranking := func(temp float64) float64 {
		var loss float64
		for i := 0; i < b; i++ {
			var zmax, zsum, tsum float64 = math.Inf(-1), 0, 0
			for j := 0; j < c; j++ {
				zmax = max(zmax, z[i*c+j]/temp)
			}
			for j := 0; j < c; j++ {
				zsum += math.Exp(z[i*c+j]/temp - zmax)
				tsum += math.Exp(math.Log(p[i*c+j]) / temp) // log 0 = −Inf, exp(−Inf) = 0
			}
			for j := 0; j < c; j++ {
				logSoftmax := z[i*c+j]/temp - zmax - math.Log(zsum)
				target := math.Exp(math.Log(p[i*c+j])/temp) / tsum
				loss -= logSoftmax * target
			}
		}
		return loss / b
	}
	var ch torch.Chain
	zt := ch.T(torch.FromFloat64(z, 1, b, c))
	pt := ch.T(torch.FromFloat64(p, 1, b, c))
	ours := ch.T(batchedSoftCE(zt, pt))
	if ch.Err() != nil {
		t.Fatal(ch.Err())
	}
	got, err := ours.Item()
	if err != nil {
		t.Fatal(err)
	}
	if want := ddranking(1); math.Abs(got-want) > 1e-12 {
		t.Errorf("soft cross-entropy %v, DD-Ranking's at temperature 1 %v", got, want)
	}
	if other := ddranking(2); math.Abs(got-other) < 1e-3 {
		t.Errorf("the comparison cannot fail: temperature 2 gives %v too", other)
	}
}
