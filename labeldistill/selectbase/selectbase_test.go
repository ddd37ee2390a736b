package selectbase

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// sharedDataDir is the test data beside the repository (../shared/datasets), or a skip.
func sharedDataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(filepath.Join(dir, "mnist")); err != nil {
		t.Skipf("shared datasets not found at %s", dir)
	}
	return dir
}

// mnistConfig is a config of real MNIST with a 1,000-image validation split.
func mnistConfig(t *testing.T, n int) config.Config {
	cfg := config.Default()
	cfg.Dataset, cfg.DataDir, cfg.BaseExamples, cfg.ValidationSize, cfg.Threads = "mnist", sharedDataDir(t), n, 1000, 1
	return cfg
}

var (
	mnistOnce sync.Once
	mnistData *labeldistill.Data
	mnistErr  error
)

// mnist is real MNIST loaded once (the whole target set; validation 1,000 images).
func mnist(t *testing.T) *labeldistill.Data {
	cfg := mnistConfig(t, 10)
	mnistOnce.Do(func() { mnistData, mnistErr = labeldistill.LoadData(cfg) })
	if mnistErr != nil {
		t.Fatal(mnistErr)
	}
	return mnistData
}

// checkSelection checks that a selection is n distinct target-set examples, n/C of each class.
func checkSelection(t *testing.T, ds *labeldistill.Data, sel *Selection, n int) {
	t.Helper()
	if len(sel.Indices) != n || len(sel.Classes) != n {
		t.Fatalf("%d indices, %d classes, want %d", len(sel.Indices), len(sel.Classes), n)
	}
	pos := map[int64]int{}
	for i, f := range ds.TargetSet.Index {
		pos[int64(f)] = i
	}
	counts := make([]int, ds.Classes)
	seen := map[int64]bool{}
	for k, f := range sel.Indices {
		i, ok := pos[f]
		if !ok || seen[f] {
			t.Fatalf("index %d: in the target set %v, twice %v", f, ok, seen[f])
		}
		seen[f] = true
		if ds.TargetSet.Labels[i] != sel.Classes[k] {
			t.Fatalf("index %d: class %d recorded, %d in the data", f, sel.Classes[k], ds.TargetSet.Labels[i])
		}
		counts[sel.Classes[k]]++
	}
	for c, k := range counts {
		if k != n/ds.Classes {
			t.Fatalf("class %d has %d examples, want %d (%v)", c, k, n/ds.Classes, counts)
		}
	}
}

// prototypes is synthetic data of 2 classes whose 28×28 images lie around 5 prototypes each
// (random binary patterns) with small noise; of[i] is the prototype of target example i.
func prototypes(t *testing.T) (*labeldistill.Data, []int) {
	r := rand.New(rand.NewPCG(5, 6))
	const classes, protos, per, hw = 2, 5, 30, 28 * 28
	pat := make([][]float32, classes*protos)
	for i := range pat {
		pat[i] = make([]float32, hw)
		for j := range pat[i] {
			if r.IntN(2) == 1 {
				pat[i][j] = 1
			}
		}
	}
	split := func(role string, n int, of []int) data.Split {
		s := data.Split{Role: role, Images: make([]float32, n*hw), Labels: make([]int64, n), N: n, C: 1, H: 28, W: 28, Classes: classes, Index: make([]int, n)}
		for i := range n {
			p := r.IntN(classes * protos)
			if of != nil {
				of[i] = p
			}
			s.Labels[i] = int64(p / protos)
			s.Index[i] = 1000 + i
			for j := range hw {
				s.Images[i*hw+j] = pat[p][j] + float32(0.05*r.NormFloat64())
			}
		}
		return s
	}
	n := classes * protos * per
	of := make([]int, n)
	ds := &labeldistill.Data{Target: "mnist", Source: "mnist", Classes: classes, Shape: [3]int64{1, 28, 28},
		TargetSet: split(data.SplitTarget, n, of), Validation: split(data.SplitValidation, 50, nil), Test: split(data.SplitTest, 50, nil),
		Files: map[string]string{}, NormMean: []float64{0}, NormStd: []float64{1}}
	return ds, of
}

// On images around 5 prototypes per class, kmeans takes one image of each prototype: the
// one nearest the mean of the prototype's images.
func TestKMeansSelectsOneImagePerPrototype(t *testing.T) {
	ds, of := prototypes(t)
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.Threads = "mnist", 10, 1
	sel, err := Select(context.Background(), cfg, Options{Strategy: KMeans, Data: ds})
	if err != nil {
		t.Fatal(err)
	}
	checkSelection(t, ds, sel, 10)
	p := points{x: ds.TargetSet.Images, d: 28 * 28}
	want := map[int64]bool{}
	for proto := range 10 {
		var rows []int
		for i, o := range of {
			if o == proto {
				rows = append(rows, i)
			}
		}
		want[int64(ds.TargetSet.Index[nearestToMean(p, rows)])] = true
	}
	got := map[int64]bool{}
	for _, f := range sel.Indices {
		got[f] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kmeans picked %v, want the image nearest each prototype's mean %v", sel.Indices, want)
	}
	for _, cr := range sel.ClassResults {
		if !cr.Converged {
			t.Errorf("class %d: k-means did not converge", cr.Class)
		}
	}
}

// random is the balanced draw distill makes itself with the base seed.
func TestRandomIsDistillsOwnDraw(t *testing.T) {
	ds := mnist(t)
	cfg := mnistConfig(t, 20)
	sel, err := Select(context.Background(), cfg, Options{Strategy: Random})
	if err != nil {
		t.Fatal(err)
	}
	run, err := labeldistill.LoadData(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.Indices, run.BaseIndices) {
		t.Fatalf("random %v, distill's draw %v", sel.Indices, run.BaseIndices)
	}
	checkSelection(t, ds, sel, 20)
}

// paperOptions are a quick paper selection on real MNIST: 3 candidates, 2 repeats, 100 steps.
func paperSetup(t *testing.T) (config.Config, Options) {
	cfg := mnistConfig(t, 10)
	cfg.BaselineMaxSteps = 100
	return cfg, Options{Strategy: Paper, Candidates: 3, Repeats: 2, Data: mnist(t)}
}

// The paper strategy keeps the candidate with the best mean validation accuracy at any step;
// the scores are real validation accuracies (one is recomputed by a lone model); the first
// candidate is distill's own draw. Interrupted, it continues from its finished candidates
// and ends with the same selection.
func TestPaperPicksTheBestValidatedCandidate(t *testing.T) {
	ds := mnist(t)
	cfg, o := paperSetup(t)
	sel, err := Select(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	checkSelection(t, ds, sel, 10)
	ps := sel.Paper
	if ps == nil || !slices.Equal(ps.Steps, []int{50, 100}) || len(ps.Candidates) != 3 {
		t.Fatalf("paper result %+v", ps)
	}
	best := 0
	for k, c := range ps.Candidates {
		if len(c.Accuracies) != 2 || len(c.Accuracies[0]) != 2 {
			t.Fatalf("candidate %d: accuracies %v", k, c.Accuracies)
		}
		top := math.Inf(-1)
		for s := range ps.Steps {
			m := (c.Accuracies[0][s] + c.Accuracies[1][s]) / 2
			top = max(top, m)
		}
		if top != c.Best {
			t.Fatalf("candidate %d: best %v, its mean accuracies peak at %v", k, c.Best, top)
		}
		if c.Best > ps.Candidates[best].Best {
			best = k
		}
	}
	if ps.Chosen != best || !slices.Equal(sel.Indices, ps.Candidates[best].Indices) || ps.Accuracy != ps.Candidates[best].Best {
		t.Fatalf("chose candidate %d (%v), the best is %d", ps.Chosen, ps.Accuracy, best)
	}
	if slices.Equal(ps.Candidates[0].Indices, ps.Candidates[1].Indices) {
		t.Fatal("candidates 0 and 1 are the same set")
	}
	run, err := labeldistill.LoadData(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ps.Candidates[0].Indices, run.BaseIndices) {
		t.Fatal("candidate 0 is not the set distill draws itself")
	}
	// Repeat 1 of the chosen candidate, retrained alone through train.Trainer.TrainOne.
	k := ps.Chosen
	idx := make([]int, 10)
	for i, f := range ps.Candidates[k].Indices {
		idx[i] = int(f)
	}
	b, err := data.SelectBaseAt(&ds.TargetSet, idx)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfg.Resolved()
	s := &selector{o: o, cfg: rc, ds: ds, dev: torch.CPU}
	x, table, err := s.upload(&data.Split{Images: b.Images, Labels: b.Labels, N: 10, C: 1, H: 28, W: 28, Classes: 10}, true)
	if err != nil {
		t.Fatal(err)
	}
	vx, vy, err := engine.SplitTensors(&ds.Validation, ds.Shape, s.dev)
	if err != nil {
		t.Fatal(err)
	}
	net, err := nets.New(rc.Arch, 1, 28, 28, 10)
	if err != nil {
		t.Fatal(err)
	}
	var lone []float64
	tr := &train.Trainer{Net: net, Cfg: rc, Images: x, Labels: table, Batch: rc.EvalBatch, Opt: train.AdamSpec(rc.EvalLR), Device: s.dev}
	m, err := tr.TrainOne(context.Background(), 100, train.Seed(uint64(cfg.Seed), fmt.Sprintf("select-base-paper-%d", k), 1),
		&train.Probe{At: []int{50, 100}, Fn: func(_ int, m *train.Models) error {
			a, err := m.Accuracy(context.Background(), vx, vy)
			lone = append(lone, a)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if !slices.Equal(lone, ps.Candidates[k].Accuracies[1]) {
		t.Fatalf("repeat 1 of candidate %d retrained alone: %v, recorded %v", k, lone, ps.Candidates[k].Accuracies[1])
	}

	// Interrupted after its first candidate, then run again: the same selection.
	o.ProgressDir = filepath.Join(t.TempDir(), "progress")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = func(p Progress) {
		if p.Phase == "candidate" {
			cancel()
		}
	}
	if _, err := Select(ctx, cfg, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted selection: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(o.ProgressDir, "candidate-*.json"))
	if len(files) != 1 {
		t.Fatalf("progress after one candidate: %v", files)
	}
	var notes []string
	o.Progress = func(p Progress) { notes = append(notes, p.Message) }
	again, err := Select(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Paper, sel.Paper) {
		t.Fatalf("continued selection differs: chose %d, uninterrupted %d", again.Paper.Chosen, ps.Chosen)
	}
	if !slices.Contains(notes, "1 of 3 candidates finished earlier") || len(slices.DeleteFunc(notes, func(n string) bool { return !strings.HasPrefix(n, "candidate ") })) != 2 {
		t.Fatalf("continued selection trained other than the 2 unfinished candidates: %q", notes)
	}
	// Progress of another selection (other repeats) is refused, naming the folder.
	o.Repeats, o.Progress = 1, nil
	var pe *ProgressError
	if _, err := Select(context.Background(), cfg, o); !errors.As(err, &pe) || !strings.Contains(err.Error(), o.ProgressDir) {
		t.Fatalf("progress of other settings: %v", err)
	}
}

// herding and kcenter take valid balanced selections from a briefly trained network's
// features, the same ones twice.
func TestFeatureStrategies(t *testing.T) {
	full := mnist(t)
	ds := *full
	ds.TargetSet = *full.TargetSet.Prefix(2000) // one epoch = 8 steps of 256
	cfg := mnistConfig(t, 20)
	for _, strategy := range []string{Herding, KCenter} {
		o := Options{Strategy: strategy, FeatureEpochs: 1, Data: &ds}
		a, err := Select(context.Background(), cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		checkSelection(t, &ds, a, 20)
		if a.Settings.FeatureSteps != 8 || a.FeatureNetAcc < 30 || len(a.Scores) != 20 {
			t.Fatalf("%s: %d feature steps, feature network %.1f%%, %d scores", strategy, a.Settings.FeatureSteps, a.FeatureNetAcc, len(a.Scores))
		}
		b, err := Select(context.Background(), cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Indices, b.Indices) {
			t.Fatalf("%s: %v then %v", strategy, a.Indices, b.Indices)
		}
		if strategy == KCenter {
			for _, cr := range a.ClassResults {
				if !(cr.Radius > 0) {
					t.Fatalf("class %d: covering radius %v", cr.Class, cr.Radius)
				}
			}
		}
	}
}

// Bad settings are errors naming them.
func TestSelectBadInput(t *testing.T) {
	ds, _ := prototypes(t)
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.Threads = "mnist", 10, 1
	var ue *UsageError
	if _, err := Select(context.Background(), cfg, Options{Strategy: "coreset", Data: ds}); !errors.As(err, &ue) || ue.Field != "strategy" {
		t.Errorf("unknown strategy: %v", err)
	}
	if _, err := Select(context.Background(), cfg, Options{Strategy: Paper, Candidates: -1, Data: ds}); !errors.As(err, &ue) || ue.Field != "candidates" {
		t.Errorf("candidates -1: %v", err)
	}
	var fe *config.FieldError
	cfg.BaseExamples = 400 // 200 per class, the classes have about 150
	if _, err := Select(context.Background(), cfg, Options{Strategy: KMeans, Data: ds}); !errors.As(err, &fe) || fe.Field != "base_examples" {
		t.Errorf("N larger than a class: %v", err)
	}
	cfg.BaseExamples = 15
	if _, err := Select(context.Background(), cfg, Options{Strategy: KMeans, Data: ds}); !errors.As(err, &fe) || fe.Field != "base_examples" {
		t.Errorf("N not a multiple of the classes: %v", err)
	}
}

// An index file written by Write is what distill reads, and ReadSelection reads it back.
func TestWriteRead(t *testing.T) {
	ds, _ := prototypes(t)
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.Threads = "mnist", 10, 1
	sel, err := Select(context.Background(), cfg, Options{Strategy: KMeans, Data: ds})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sel.txt")
	if err := sel.Write(path); err != nil {
		t.Fatal(err)
	}
	f, err := data.ReadBaseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Indices, sel.Indices) || f.Header == nil || f.Header.Strategy != KMeans || f.Header.BaseExamples != 10 || f.SHA256 != sel.IndexFileSHA256 {
		t.Fatalf("read back %+v", f)
	}
	back, err := ReadSelection(path)
	if err != nil || back.Fingerprint != sel.Fingerprint || !slices.Equal(back.Indices, sel.Indices) {
		t.Fatalf("ReadSelection: %v", err)
	}
	plan, err := Plan(cfg, Options{Strategy: KMeans}, back.DataSHA256)
	if err != nil || !back.Same(plan) {
		t.Fatalf("the same settings are not the same selection: %v", err)
	}
	if plan, _ := Plan(cfg, Options{Strategy: Herding}, back.DataSHA256); back.Same(plan) {
		t.Fatal("herding is the same selection as kmeans")
	}
	// An edited index file no longer matches its record.
	if err := os.WriteFile(path, append([]byte("# edited\n"), mustRead(t, path)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSelection(path); err == nil {
		t.Fatal("an edited index file was taken for its record's")
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
