package study

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
)

// tinyDD distils a tiny method dd run on real MNIST (20 images over 2 steps × 2 epochs: T =
// 4, a few meta-steps) and returns it read back, with test and validation splits cut.
func tinyDD(t *testing.T) (*artifact.Artifact, *Data) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = sharedDataDir(t)
	cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.EvalModels, cfg.Threads = config.MethodDD, 20, 2, 2, 1
	cfg.DDSteps, cfg.DDEpochs = 2, 2
	cfg.TargetSetSize, cfg.ValidationSize, cfg.OuterBatch = 1024, 500, 256
	cfg.Baselines = []string{}
	res, err := labeldistill.Distill(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := artifact.Write(dir, res); err != nil {
		t.Fatal(err)
	}
	art, err := artifact.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(art.StepLRs) != 4 || art.Report.T != 4 {
		t.Fatalf("tiny dd artifact: %d step sizes, T = %d; want 4", len(art.StepLRs), art.Report.T)
	}
	d, err := LoadData(art.Report.Config)
	if err != nil {
		t.Fatal(err)
	}
	cut := func(s *data.Split, n int) *data.Split {
		size := len(s.Images) / s.N
		return &data.Split{Images: s.Images[:n*size], Labels: s.Labels[:n], N: n, C: s.C, H: s.H, W: s.W, Classes: s.Classes}
	}
	return art, &Data{Test: cut(d.Test, 500), Validation: cut(d.Validation, 200)}
}

// evaluateWith is `ldtorch evaluate` (dd's recipe) on a copy of art with step sizes lrs and
// architecture arch: the direct computation a dd study's setting must equal.
func evaluateWith(t *testing.T, art *artifact.Artifact, d *Data, lrs []float32, arch string, models int) []float64 {
	t.Helper()
	a := *art
	a.StepLRs = lrs
	res, err := artifact.Evaluate(context.Background(), &a, d.Test, artifact.EvalConfig{Arch: arch, Models: models, Recipe: artifact.RecipeDD})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != len(lrs) || res.Recipe != artifact.RecipeDD {
		t.Fatalf("evaluate trained %d steps with recipe %s, want %d with dd", res.Steps, res.Recipe, len(lrs))
	}
	return res.Accuracies
}

func TestDDStudies(t *testing.T) {
	art, d := tinyDD(t)
	const m = 3
	ctx := context.Background()
	lrs := art.StepLRs
	var sum float64
	for _, v := range lrs {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(lrs)))
	own := evaluateWith(t, art, d, lrs, config.ArchLeNet, m)

	// steps: K = T is the artifact's own evaluation; K = 2 equals training all T steps with
	// the last two step sizes at 0; K = 6 the T learnt steps and two at the mean.
	st, err := Run(ctx, Steps, art, d, Config{Models: m, Steps: []int{2, 4, 6}})
	if err != nil {
		t.Fatal(err)
	}
	zeroed := []float32{lrs[0], lrs[1], 0, 0}
	extended := append(slices.Clone(lrs), mean, mean)
	for i, want := range [][]float64{evaluateWith(t, art, d, zeroed, config.ArchLeNet, m), own, evaluateWith(t, art, d, extended, config.ArchLeNet, m)} {
		s := st.Settings[i]
		if !slices.Equal(s.Accuracies, want) {
			t.Errorf("steps %s: accuracies %v, want %v (the direct evaluation)", s.Label, s.Accuracies, want)
		}
		if s.Recipe != artifact.RecipeDD || s.Steps != []int{2, 4, 6}[i] || *s.Delta != s.Steps-4 {
			t.Errorf("steps setting %d: %+v", i, s)
		}
	}
	if st.Settings[2].Label != "6 (2 at the mean)" || st.Settings[2].LR != float64(mean) {
		t.Errorf("steps beyond T: %q at %v, want the mean %v", st.Settings[2].Label, st.Settings[2].LR, mean)
	}
	// The default step counts: ⅓ … 1 of T and T + 5.
	if st, err = Run(ctx, Steps, art, d, Config{Models: 1}); err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, s := range st.Settings {
		counts = append(counts, s.Steps)
	}
	if want := []int{1, 2, 3, 4, 9}; !slices.Equal(counts, want) {
		t.Errorf("default steps %v, want %v", counts, want)
	}
	if got := DDDefaultSteps(30); !slices.Equal(got, []int{10, 15, 20, 25, 30, 35}) {
		t.Errorf("DDDefaultSteps(30) = %v, want the paper's 10 … 35", got)
	}

	// lr: the learnt step sizes, then the mean at every step.
	st, err = Run(ctx, LR, art, d, Config{Models: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Settings) != 2 || !slices.Equal(st.Settings[0].Accuracies, own) {
		t.Fatalf("lr study: %+v, want the own evaluation %v first", st.Settings, own)
	}
	if want := evaluateWith(t, art, d, []float32{mean, mean, mean, mean}, config.ArchLeNet, m); !slices.Equal(st.Settings[1].Accuracies, want) ||
		st.Settings[1].StepSizes != StepSizesMean {
		t.Errorf("lr study, mean step size: %v, want %v", st.Settings[1].Accuracies, want)
	}

	// order: fixed is the own evaluation; the shuffles train other models.
	st, err = Run(ctx, Order, art, d, Config{Models: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Settings) != 3 || !slices.Equal(st.Settings[0].Accuracies, own) {
		t.Fatalf("order study: %+v, want the own evaluation %v first", st.Settings, own)
	}
	for _, s := range st.Settings[1:] {
		if slices.Equal(s.Accuracies, own) || len(s.Accuracies) != m {
			t.Errorf("order %s: accuracies %v, the fixed order's %v", s.Order, s.Accuracies, own)
		}
	}
	// arch: each architecture that fits (alexnet needs colour 32×32 images), dd's recipe.
	st, err = Run(ctx, Arch, art, d, Config{Models: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Settings) != 2 || st.Settings[0].Label != "lenet (distilled with it)" || st.Settings[1].Arch != config.ArchResNet {
		t.Fatalf("arch study settings: %+v", st.Settings)
	}
	if !slices.Equal(st.Settings[0].Accuracies, own) {
		t.Errorf("arch lenet: %v, want the own evaluation %v", st.Settings[0].Accuracies, own)
	}
	if want := evaluateWith(t, art, d, lrs, config.ArchResNet, m); !slices.Equal(st.Settings[1].Accuracies, want) {
		t.Errorf("arch resnet: %v, want %v", st.Settings[1].Accuracies, want)
	}
	if _, err := Run(ctx, Arch, art, d, Config{Models: 1, Archs: []string{config.ArchAlexNet}}); err == nil || !strings.HasPrefix(err.Error(), "archs: ") {
		t.Errorf("arch alexnet on 1×28×28 images: %v", err)
	}

	// Refusals: step counts for a study other than steps; lr and order of a label artifact.
	if _, err := Run(ctx, LR, art, d, Config{Models: 1, Steps: []int{3}}); err == nil || !strings.HasPrefix(err.Error(), "steps: ") {
		t.Errorf("lr study with step counts: %v", err)
	}
	labels := *art
	rep := *art.Report
	rep.Config.Method, rep.Config.Learn = config.MethodLD, config.LearnImages
	labels.Report, labels.StepLRs = &rep, nil
	for _, kind := range []string{LR, Order} {
		_, err := Run(ctx, kind, &labels, d, Config{Models: 1})
		if err == nil || !strings.Contains(err.Error(), "needs a method dd artifact") {
			t.Errorf("study %s of a method ld artifact: %v", kind, err)
		}
	}

	// Flexibility: the studies of a method ld artifact (the same images, trained the
	// standard way) beside the dd studies.
	ddStudies := map[string]*Study{}
	for _, k := range FlexVersusKinds {
		if ddStudies[k], err = Run(ctx, k, art, d, Config{Models: 2}); err != nil {
			t.Fatal(err)
		}
	}
	ldStudies := map[string]*Study{}
	for k, sc := range map[string]Config{Steps: {Deltas: []int{0, 4}}, Optimizer: {LRs: []float64{1e-3, 1e-2}},
		Arch: {Archs: []string{config.ArchLeNet}}} {
		sc.Models = 2
		if ldStudies[k], err = Run(ctx, k, &labels, d, sc); err != nil {
			t.Fatal(err)
		}
	}
	f, err := NewFlexibility(ldStudies, ddStudies, rep.Config, art.Report.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Panels) != 3 || f.Panels[0].Name != FlexSteps || f.Panels[1].Name != FlexOptimisation || f.Panels[2].Name != FlexArch {
		t.Fatalf("flexibility panels %+v", f.Panels)
	}
	find := func(pn Panel, method, label string) Point {
		for _, s := range pn.Series {
			for _, p := range s.Points {
				if s.Method == method && p.Label == label {
					return p
				}
			}
		}
		t.Fatalf("panel %s: no point %q of %s", pn.Name, label, method)
		return Point{}
	}
	ownMean, _ := train.MeanStd(ddStudies[Steps].Settings[3].Accuracies)
	if p := find(f.Panels[0], "DD", "4"); p.X != 1 || !p.Own || p.Mean != ownMean {
		t.Errorf("steps panel, DD at T: %+v (mean %v)", p, ownMean)
	}
	if p := find(f.Panels[0], "Our DD", "T+4"); p.X != 2 || p.Own {
		t.Errorf("steps panel, T+4 of T = 4: %+v", p)
	}
	opt := f.Panels[1]
	if len(opt.Series) != 2 || len(opt.Series[0].Points) != 3 || len(opt.Series[1].Points) != 4 {
		t.Fatalf("optimisation panel: %+v", opt.Series)
	}
	if p := opt.Series[0].Points[0]; !p.Own || p.Mean != ldStudies[Optimizer].Settings[0].Mean || p.Label != "Our DD: Adam lr 0.001 (own recipe)" {
		t.Errorf("optimisation panel, the labels' own recipe: %+v", p)
	}
	if p := opt.Series[0].Points[2]; p.Label != "Our DD: sgd momentum 0.9 lr 0.01" {
		t.Errorf("optimisation panel, SGD with momentum at its usual rate: %+v", p)
	}
	if p := find(opt, "DD", "DD: shuffled across epochs"); p.Mean != ddStudies[Order].Settings[2].Mean || p.X != 6 {
		t.Errorf("optimisation panel, shuffled across epochs: %+v", p)
	}
	if cats := f.Panels[2].Categories(); !slices.Equal(cats, []string{"lenet", "resnet"}) {
		t.Errorf("architecture panel categories %v", cats)
	}
	// Refusals: dd studies on both sides, a study missing, two datasets.
	if _, err := NewFlexibility(ddStudies, ddStudies, art.Report.Config, art.Report.Config); err == nil || !strings.Contains(err.Error(), "takes learnt labels") {
		t.Error("flexibility of dd beside dd accepted")
	}
	if _, err := NewFlexibility(ldStudies, ldStudies, rep.Config, rep.Config); err == nil || !strings.Contains(err.Error(), "must be a method dd artifact's") {
		t.Errorf("flexibility of labels beside labels: %v", err)
	}
	other := *ddStudies[Steps]
	other.Dataset = "kmnist"
	ddStudies[Steps] = &other
	if _, err := NewFlexibility(ldStudies, ddStudies, rep.Config, art.Report.Config); err == nil || !strings.Contains(err.Error(), "kmnist") {
		t.Errorf("flexibility across datasets: %v", err)
	}
}

// TestDDOrder: the shuffles keep each block's size and visit the images as their order
// says: within epochs every epoch is a permutation of all images; across epochs every image
// comes dd_epochs times in all; each model has its own shuffle.
func TestDDOrder(t *testing.T) {
	sch := engine.DDSchedule(20, 2, make([]float32, 6))
	if got := ddOrder(OrderFixed, sch, 6, 1, 0); fmt.Sprint(got) != fmt.Sprint(sch.Batches) {
		t.Errorf("fixed order %v, want the schedule's %v", got, sch.Batches)
	}
	counts := func(bs [][]int64) map[int64]int {
		c := map[int64]int{}
		for _, b := range bs {
			for _, i := range b {
				c[i]++
			}
		}
		return c
	}
	for _, order := range []string{OrderWithin, OrderAcross} {
		a, b := ddOrder(order, sch, 6, 1, 0), ddOrder(order, sch, 6, 1, 1)
		if len(a) != 6 || fmt.Sprint(a) == fmt.Sprint(b) || fmt.Sprint(a) != fmt.Sprint(ddOrder(order, sch, 6, 1, 0)) {
			t.Errorf("%s: models 0 and 1 %v and %v (want 6 blocks, distinct, reproducible)", order, a, b)
		}
		for _, blk := range a {
			if len(blk) != 10 {
				t.Fatalf("%s: a block of %d images, want 10", order, len(blk))
			}
		}
		c := counts(a)
		for i := int64(0); i < 20; i++ {
			if c[i] != 3 {
				t.Errorf("%s: image %d visited %d times, want 3", order, i, c[i])
			}
		}
		if order == OrderWithin {
			for e := 0; e < 3; e++ {
				if ce := counts(a[2*e : 2*e+2]); len(ce) != 20 {
					t.Errorf("within epochs: epoch %d visits %d distinct images, want all 20", e, len(ce))
				}
			}
		}
	}
}
