package engine

// trace_test.go: a run of the authors' code, recorded by scripts/trace/authors.py, replayed
// through this meta-loop on the same split, initial values, target batches and base batches,
// and compared tensor by tensor at the traced meta-steps; then the authors' fresh models
// (their initial weights and minibatches) trained on their images and on ours. Skipped unless
// LDTORCH_TRACE names a trace; LDTORCH_TRACE_COMPAT=authors replays under the authors'
// choices (Config.Compat); LDTORCH_TRACE_SELF names other recordings of the same script:
// over the first 100 meta-steps ours must be no farther from theirs than their code from
// itself. Run: go test ./labeldistill/engine -run TestReplayAuthorsTrace -v.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// authorsTrace is a trace file and what its arrays say.
type authorsTrace struct {
	a      *npz.Archive
	script string
	args   struct {
		Epochs     int `json:"epochs"`
		Batch      int `json:"batch_size"`
		InnerBatch int `json:"inner_batch_size"`
		Base       int `json:"num_base_examples"`
		Seed       int `json:"random_seed"`
	}
	steps []int // traced meta-steps
}

func readAuthorsTrace(t *testing.T, path string) *authorsTrace {
	a, err := npz.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := &authorsTrace{a: a}
	if err := json.Unmarshal(tr.bytes(t, "args"), &tr.args); err != nil {
		t.Fatalf("%s: args: %v", path, err)
	}
	rr := a.Get("step1.ridge.w") != nil
	switch {
	case a.Get("init_images") != nil && rr:
		tr.script = "data_distillation_rr"
	case a.Get("init_images") != nil:
		tr.script = "data_distillation_or2"
	case a.Get("init_labels") != nil && rr:
		tr.script = "label_distillation_rr"
	case a.Get("init_labels") != nil:
		tr.script = "label_distillation_or2"
	default:
		t.Fatalf("%s: not a trace of scripts/trace/authors.py (no init_images or init_labels)", path)
	}
	for _, name := range a.Names() {
		var k int
		if n, _ := fmt.Sscanf(name, "step%d.", &k); n == 1 && !slices.Contains(tr.steps, k) {
			tr.steps = append(tr.steps, k)
		}
	}
	slices.Sort(tr.steps)
	return tr
}

func (tr *authorsTrace) array(t *testing.T, name string) *npz.Array {
	t.Helper()
	x := tr.a.Get(name)
	if x == nil {
		t.Fatalf("trace: no array %q", name)
	}
	return x
}

func (tr *authorsTrace) bytes(t *testing.T, name string) []byte {
	b, ok := tr.array(t, name).Data.([]uint8)
	if !ok {
		t.Fatalf("trace: %s is not text", name)
	}
	return b
}

func (tr *authorsTrace) f32(t *testing.T, name string) []float32 {
	v, ok := tr.array(t, name).Data.([]float32)
	if !ok {
		t.Fatalf("trace: %s is %s, want float32", name, tr.array(t, name).DType)
	}
	return v
}

func (tr *authorsTrace) f64(t *testing.T, name string) []float64 {
	switch v := tr.array(t, name).Data.(type) {
	case []float64:
		return v
	case []float32:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	t.Fatalf("trace: %s is not floating point", name)
	return nil
}

func (tr *authorsTrace) ints(t *testing.T, name string) []int {
	v, ok := tr.array(t, name).Data.([]int64)
	if !ok {
		t.Fatalf("trace: %s is %s, want int64", name, tr.array(t, name).DType)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// theirNormalise is torchvision's ToTensor then Normalize((0.1307,), (0.3081,)), in float32
// as they compute it, so that both programs see the same bits.
func theirNormalise(r *data.RawSet, idx []int) data.Split {
	size := r.ImageSize()
	s := data.Split{Images: make([]float32, len(idx)*size), Labels: make([]int64, len(idx)), N: len(idx), C: 1, H: 28, W: 28, Classes: 10}
	mean, std := float32(0.1307), float32(0.3081)
	for i, j := range idx {
		for p := 0; p < size; p++ {
			s.Images[i*size+p] = (float32(r.Pixels[j*size+p])/255 - mean) / std
		}
		s.Labels[i] = r.Labels[j]
	}
	return s
}

// images says whether the trace learns images (else labels).
func (tr *authorsTrace) images() bool { return strings.HasPrefix(tr.script, "data_") }

// data is MNIST split as the authors' run split it. Learnt images: the base examples'
// labels are their fixed image labels 0, 1, …, C−1, 0, 1, … (the images are learnt).
// Learnt labels: their base examples.
func (tr *authorsTrace) data(t *testing.T) *Data {
	train, test := testkit.SharedMNIST(t)
	all := make([]int, test.N)
	for i := range all {
		all[i] = i
	}
	var base data.Split
	baseIdx := make([]int64, tr.args.Base)
	if tr.images() {
		base = theirNormalise(train, make([]int, tr.args.Base))
		for i := range base.Labels {
			base.Labels[i] = int64(i % 10)
		}
	} else {
		idx := tr.ints(t, "base_indices")
		base = theirNormalise(train, idx)
		for i, j := range idx {
			baseIdx[i] = int64(j)
		}
	}
	return &Data{Target: "mnist", Source: "mnist", Classes: 10, Shape: [3]int64{1, 28, 28},
		TargetSet: theirNormalise(train, tr.ints(t, "target_set")), Validation: theirNormalise(train, tr.ints(t, "validation")),
		Test: theirNormalise(test, all), Base: base, BaseIndices: baseIdx, Files: map[string]string{}}
}

func (tr *authorsTrace) config(compat string) config.Config {
	cfg := config.Default()
	cfg.Dataset, cfg.Learn, cfg.Compat = "mnist", config.LearnLabels, compat
	if tr.images() {
		cfg.Learn = config.LearnImages
	}
	cfg.Method = config.MethodLD
	if strings.HasSuffix(tr.script, "_rr") {
		cfg.Method = config.MethodRR
	}
	cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = tr.args.Base, tr.args.InnerBatch, tr.args.Batch
	cfg.Epochs, cfg.Seed, cfg.EvalModels, cfg.Baselines, cfg.Threads = tr.args.Epochs, int64(tr.args.Seed), 1, []string{}, 1
	return cfg
}

// replayBatches gives the loop the authors' batches: their target batches as positions in
// the target set (which is theirs, in their order), their base permutations' prefixes.
type replayBatches struct {
	epochs [][]int // each epoch's order of the target set
	perms  [][]int // each meta-step's base permutation
	step   int
}

func (tr *authorsTrace) batches(t *testing.T) *replayBatches {
	pos := map[int]int{}
	for i, j := range tr.ints(t, "target_set") {
		pos[j] = i
	}
	idx, off := tr.ints(t, "target_idx"), tr.ints(t, "target_offsets")
	perEpoch := StepsPerEpoch(len(pos), tr.args.Batch)
	r := &replayBatches{}
	for s := 0; s+1 < len(off); s++ {
		if s%perEpoch == 0 {
			r.epochs = append(r.epochs, nil)
		}
		e := len(r.epochs) - 1
		for _, j := range idx[off[s]:off[s+1]] {
			r.epochs[e] = append(r.epochs[e], pos[j])
		}
	}
	perm := tr.array(t, "base_perm")
	all := tr.ints(t, "base_perm")
	n := perm.Shape[1]
	for s := 0; s < perm.Shape[0]; s++ {
		r.perms = append(r.perms, all[s*n:(s+1)*n])
	}
	return r
}

func (r *replayBatches) epochOrder(n int) []int {
	o := r.epochs[0]
	r.epochs = r.epochs[1:]
	if len(o) != n {
		panic(fmt.Sprintf("replay: an epoch of %d target examples, the trace's has %d", n, len(o)))
	}
	return o
}

func (r *replayBatches) baseIndices(n, k int) []int {
	p := r.perms[r.step]
	r.step++
	return p[:k]
}

// tensorOf is the trace's array name as a tensor of shape, on the CPU, in the caller's scope.
func (tr *authorsTrace) tensorOf(t *testing.T, name string) *torch.Tensor {
	x := tr.array(t, name)
	shape := make([]int64, len(x.Shape))
	for i, d := range x.Shape {
		shape[i] = int64(d)
	}
	v, err := torch.FromFloat32(tr.f32(t, name), shape...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// setParams copies the trace's model k into params, the first len(params) of net's.
func (tr *authorsTrace) setParams(t *testing.T, k int, params []*torch.Tensor, net *nets.Net) {
	names, _ := net.TorchNames()
	err := torch.NoGrad(func() error {
		for i, p := range params {
			if err := p.Copy_(tr.tensorOf(t, fmt.Sprintf("model%d.%s", k, names[i]))); err != nil {
				return fmt.Errorf("%s: %w", names[i], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// learnerModel is the network their meta-loop trains first: the last one built before it.
func (tr *authorsTrace) learnerModel(t *testing.T) int {
	k := -1
	for i := 0; tr.a.Get(fmt.Sprintf("model%d.phase", i)) != nil; i++ {
		if string(tr.bytes(t, fmt.Sprintf("model%d.phase", i))) == "main" {
			k = i
		}
	}
	if k < 0 {
		t.Fatal("trace: no network built before the meta-loop")
	}
	return k
}

// ours is what this loop holds at a traced step.
type ours struct {
	grad, value []float32
	theta       map[string][]float32
}

func TestReplayAuthorsTrace(t *testing.T) {
	path := os.Getenv("LDTORCH_TRACE")
	if path == "" {
		t.Skip("LDTORCH_TRACE names no trace of scripts/trace/authors.py")
	}
	tr := readAuthorsTrace(t, path)
	compat := os.Getenv("LDTORCH_TRACE_COMPAT")
	s := torch.NewScope()
	defer s.Close()
	in, err := prepareRun(resolved(t, tr.config(compat)), tr.data(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	l, err := newLoop(in, &parallel{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	// The learnt value: the images' pixels or the label table.
	kind, value := "labels", (*torch.Tensor)(nil)
	for _, v := range l.learnt {
		switch v := v.(type) {
		case *pixelImages:
			kind, value = "images", v.P
		case *labels:
			value = v.Y
		}
	}
	grad := map[string]string{"images": "image_grad", "labels": "label_grad"}[kind]
	// LDTORCH_TRACE_OURS names what is drawn by this run instead of taken from the trace
	// (values, theta, batches): a comparison of the inputs themselves.
	drawn := os.Getenv("LDTORCH_TRACE_OURS")
	if !strings.Contains(drawn, "values") {
		if err := torch.NoGrad(func() error { return value.Copy_(tr.tensorOf(t, "init_"+kind)) }); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(drawn, "theta") {
		tr.setParams(t, tr.learnerModel(t), l.model.params, l.model.net)
	}
	if !strings.Contains(drawn, "batches") {
		l.rand.replay = tr.batches(t)
	}

	got := map[int]*ours{}
	var errs, losses []float64
	traced := func(step int) bool { return slices.Contains(tr.steps, step) }
	l.observers = append(l.observers, Observer{
		Gradient: func(l *Loop, grads []*torch.Tensor) error {
			if !traced(l.pos.Step + 1) {
				return nil
			}
			g, err := grads[0].Float32s()
			got[l.pos.Step+1] = &ours{grad: g, theta: map[string][]float32{}}
			return err
		},
		Stepped: func(l *Loop) error {
			o := got[l.pos.Step]
			if o == nil {
				return nil
			}
			var err error
			if o.value, err = value.Float32s(); err != nil {
				return err
			}
			for i, sp := range l.model.specs {
				if o.theta[sp.Name], err = l.model.params[i].Float32s(); err != nil {
					return err
				}
			}
			return nil
		},
		Read: func(l *Loop, r StepRecord) error {
			errs, losses = append(errs, r.Stats.Error), append(losses, r.Stats.LabelLoss)
			return nil
		},
		WantsRead: func(int) bool { return true },
	})
	if err := l.run(context.Background()); err != nil {
		t.Fatal(err)
	}

	t.Logf("%s, %d meta-steps, compat %q: ours against theirs", tr.script, len(errs), compat)
	theirErr, theirLoss := tr.f64(t, "target_err"), tr.f64(t, "target_loss")
	parted := -1
	for i := range min(len(errs), len(theirErr)) {
		if parted < 0 && math.Abs(losses[i]-theirLoss[i]) > 1e-4*math.Abs(theirLoss[i]) {
			parted = i + 1
		}
	}
	t.Logf("first meta-step whose target loss differs by more than 1e-4 (relative): %d", parted)
	for _, upTo := range []int{10, 50, 100} { // the largest difference within the first steps
		worst, at := largestRelative(losses, theirLoss, upTo)
		t.Logf("largest relative target-loss difference over meta-steps 1-%d: %.2g%s", upTo, worst, atStep(at))
	}
	// LDTORCH_TRACE_SELF: other recordings of the same script (another --threads, or
	// --init-noise), comma-separated: how far their code moves from itself under a change of
	// rounding's size is the tolerance ours must meet over the first 100 meta-steps.
	if others := os.Getenv("LDTORCH_TRACE_SELF"); others != "" {
		ours, _ := largestRelative(losses, theirLoss, 100)
		tolerance := 0.0
		for _, other := range strings.Split(others, ",") {
			again := readAuthorsTrace(t, other)
			if again.script != tr.script {
				t.Fatalf("LDTORCH_TRACE_SELF: %s records %s, LDTORCH_TRACE %s", other, again.script, tr.script)
			}
			for _, upTo := range []int{10, 50, 100} {
				self, at := largestRelative(again.f64(t, "target_loss"), theirLoss, upTo)
				t.Logf("their code against itself (%s), meta-steps 1-%d: %.3g%s", other, upTo, self, atStep(at))
				if upTo == 100 {
					tolerance = max(tolerance, self)
				}
			}
		}
		if ours > tolerance {
			t.Errorf("over meta-steps 1-100 ours is %.3g from their code, more than their code from itself (%.3g)", ours, tolerance)
		} else {
			t.Logf("over meta-steps 1-100 ours is %.3g from their code, within their code's own %.3g", ours, tolerance)
		}
	}
	for _, k := range []int{1, 2, 3, 10, 50, 100, 150, 200, 245} {
		if k <= len(errs) && k <= len(theirErr) {
			t.Logf("  step %3d: target loss %.6f / %.6f, error %5.2f / %5.2f %%", k, losses[k-1], theirLoss[k-1], errs[k-1], theirErr[k-1])
		}
	}
	for _, k := range tr.steps {
		o := got[k]
		if o == nil {
			continue
		}
		line := []string{fmt.Sprintf("step %d:", k)}
		line = append(line, grad+" "+traceDiff(o.grad, tr.f32(t, fmt.Sprintf("step%d.%s", k, grad))))
		line = append(line, kind+" "+traceDiff(o.value, tr.f32(t, fmt.Sprintf("step%d.%s", k, kind))))
		line = append(line, "theta conv1.weight "+traceDiff(o.theta["conv1.weight"], tr.f32(t, fmt.Sprintf("step%d.theta.conv1.weight", k))))
		t.Log(strings.Join(line, "  "))
	}

	for _, v := range l.vals {
		t.Logf("our validation after epoch %d (our fresh model, T = %d): %.2f %%", v.Epoch, v.T, v.Accuracy)
	}
	// The authors' fresh models: their initial weights and minibatches, on their final
	// values and on ours, scored on the validation split.
	final := tr.steps[len(tr.steps)-1]
	if final != len(theirErr) { // their validation trains on the values after the last step
		t.Logf("validation not replayed: the trace's last recorded step is %d of %d (record with --steps ...,%d)", final, len(theirErr), len(theirErr))
		return
	}
	theirs := tr.f32(t, fmt.Sprintf("step%d.%s", final, kind))
	mine := got[final].value
	for k := 1; tr.a.Get(fmt.Sprintf("val%d.model", k)) != nil; k++ {
		a := replayFresh(t, tr, in, fmt.Sprintf("val%d", k), kind, theirs)
		b := replayFresh(t, tr, in, fmt.Sprintf("val%d", k), kind, mine)
		t.Logf("validation %d: their script %.2f %%, our trainer on their %s %.2f %%, on ours %.2f %%",
			k, 100-tr.f64(t, fmt.Sprintf("val%d.err", k))[0], kind, a, b)
	}
}

// largestRelative is the largest |a−b|/|b| over the first upTo entries, and its 1-based
// position (0 when every difference is zero).
func largestRelative(a, b []float64, upTo int) (worst float64, at int) {
	for i := range min(upTo, len(a), len(b)) {
		if d := math.Abs(a[i]-b[i]) / math.Abs(b[i]); d > worst {
			worst, at = d, i+1
		}
	}
	return worst, at
}

func atStep(at int) string {
	if at == 0 {
		return ""
	}
	return fmt.Sprintf(" (step %d)", at)
}

// replayFresh trains the trace's fresh model key (valK, testK) as their script did (its
// initial weights, its minibatches, T steps) with our trainer on the learnt value v (the
// images' pixels with their fixed labels, or the labels of the base images), and scores it
// on the validation split.
func replayFresh(t *testing.T, tr *authorsTrace, in *Inputs, key, kind string, v []float32) float64 {
	s := torch.NewScope()
	defer s.Close()
	n := int64(tr.args.Base)
	xs, ys := in.ds.Base.Images, v
	if kind == "images" {
		xs = make([]float32, len(v)) // normalised as their validate() does: (p − 0.1307) / 0.3081
		ys = make([]float32, int(n)*10)
		for i, p := range v {
			xs[i] = (p - float32(0.1307)) / float32(0.3081)
		}
		for i := range int(n) {
			ys[i*10+i%10] = 1
		}
	}
	var c torch.Chain
	x := c.T(torch.FromFloat32(xs, n, 1, 28, 28))
	y := c.T(torch.FromFloat32(ys, n, 10))
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	m, err := train.NewModels(in.evalNet, in.rr(), in.cfg, train.AdamSpec(in.cfg.EvalLR), []uint64{0}, in.dev, torch.Float, nets.BodyPerModel)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tr.setParams(t, int(tr.ints(t, key+".model")[0]), m.Params[0], in.evalNet)
	perm := tr.array(t, key+".perm")
	all := tr.ints(t, key+".perm")
	for st := 0; st < perm.Shape[0]; st++ {
		idx := c.T(torch.FromInt64(int64s(all[st*perm.Shape[1]:st*perm.Shape[1]+tr.args.InnerBatch]), int64(tr.args.InnerBatch)))
		if c.Err() != nil {
			t.Fatal(c.Err())
		}
		if err := m.Step(x, y, idx, int64(tr.args.InnerBatch)); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := m.Accuracy(context.Background(), in.validation.x, in.validation.y)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

// traceDiff is max |a − b| / max |b|, as text.
func traceDiff(a, b []float32) string {
	if len(a) != len(b) {
		return fmt.Sprintf("(%d values against %d)", len(a), len(b))
	}
	var d, m float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	return fmt.Sprintf("%.2e", d/m)
}
