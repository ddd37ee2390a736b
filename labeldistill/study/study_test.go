package study

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// tinyArtifact distils a tiny LD RR run on real MNIST and returns it read back, with test
// and validation splits cut to 1000 images to keep the studies quick.
func tinyArtifact(t *testing.T) (*artifact.Artifact, *Data) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = sharedDataDir(t)
	cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.EvalModels, cfg.Threads = config.MethodRR, 20, 2, 2, 1
	cfg.TargetSetSize, cfg.ValidationSize = 2048, 1000
	cfg.Baselines, cfg.BaselineSteps, cfg.BaselineMaxSteps = []string{config.BaselineTrue}, []int{5, 10, 20}, 20
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
	d, err := LoadData(art.Report.Config)
	if err != nil {
		t.Fatal(err)
	}
	cut := func(s *data.Split, n int) *data.Split {
		size := len(s.Images) / s.N
		return &data.Split{Images: s.Images[:n*size], Labels: s.Labels[:n], N: n, C: s.C, H: s.H, W: s.W, Classes: s.Classes}
	}
	return art, &Data{Test: cut(d.Test, 1000), Validation: cut(d.Validation, 500)}
}

func TestStudies(t *testing.T) {
	art, d := tinyArtifact(t)
	const m = 3
	cases := []struct {
		kind   string
		sc     Config
		labels []string
	}{
		{Steps, Config{Steps: []int{3, 10}}, []string{"3", "10"}},
		{Steps, Config{Deltas: []int{0, 5}}, []string{"T+0", "T+5"}},
		{Optimizer, Config{Optimizers: []string{"adam", "sgd"}, LRs: []float64{0.01}, Momenta: []float64{0, 0.9}},
			[]string{"adam lr 0.01", "sgd momentum 0 lr 0.01", "sgd momentum 0.9 lr 0.01"}},
		{Arch, Config{Archs: []string{config.ArchLeNet}}, []string{"lenet (distilled labels)", "lenet (true labels)"}},
		{RRStandard, Config{}, []string{"RR model (as distilled)", "standard model, early stopping on validation"}},
	}
	for _, c := range cases {
		c.sc.Models = m
		st, err := Run(context.Background(), c.kind, art, d, c.sc)
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		if len(st.Settings) != len(c.labels) {
			t.Fatalf("%s: %d settings, want %v", c.kind, len(st.Settings), c.labels)
		}
		for i, s := range st.Settings {
			if c.kind == RRStandard && i == 1 {
				if s.RR || s.Steps < 5 || len(s.ValidationErrors) != 3 {
					t.Errorf("rr-standard: standard setting %+v", s)
				}
			} else if s.Label != c.labels[i] {
				t.Errorf("%s: setting %d is %q, want %q", c.kind, i, s.Label, c.labels[i])
			}
			if len(s.Accuracies)+s.Diverged != m {
				t.Errorf("%s/%s: %d accuracies + %d diverged, want %d", c.kind, s.Label, len(s.Accuracies), s.Diverged, m)
			}
		}
		if c.kind == Arch && st.Settings[1].Labels != "true" {
			t.Errorf("arch: second setting is not the true-label baseline: %+v", st.Settings[1])
		}
		if c.kind == Steps && c.sc.Deltas != nil && (st.Settings[1].Steps != art.Report.T+5 || *st.Settings[1].Delta != 5) {
			t.Errorf("steps: T+5 trained %d steps (T = %d)", st.Settings[1].Steps, art.Report.T)
		}
	}
	// The same seed gives the same study; another seed another one.
	again := func(seed int64) []float64 {
		st, err := Run(context.Background(), Steps, art, d, Config{Models: m, Steps: []int{10}, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return st.Settings[0].Accuracies
	}
	a, b, other := again(7), again(7), again(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different accuracies: %v and %v", a, b)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 gave the same accuracies %v", a)
	}
	// Cancelled: the context's error, no study.
	ctx, cancel := context.WithCancel(context.Background())
	sc := Config{Models: m, Steps: []int{50, 60}, Progress: func(string, int, int) { cancel() }}
	if st, err := Run(ctx, Steps, art, d, sc); !errors.Is(err, context.Canceled) || st != nil {
		t.Errorf("cancelled study: %v, %v", st, err)
	}
	// rr-standard needs RR labels.
	art.Report.Config.Method = config.MethodLD
	if _, err := Run(context.Background(), RRStandard, art, d, Config{Models: 1}); err == nil {
		t.Error("rr-standard on LD labels accepted")
	}
}
