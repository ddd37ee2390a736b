package report

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/gradvar"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/torch"
)

// TestReconstructMatchesDirect: R = diag(1/colsum(Y)) Yᵀ X, computed here as a matrix
// product in another order, on 3 images of 4 pixels and 3 classes (one class unused).
func TestReconstructMatchesDirect(t *testing.T) {
	x := []float64{
		0.0, 0.5, 1.0, 0.2,
		1.0, 1.0, 0.0, 0.4,
		0.3, 0.1, 0.6, 0.9,
	}
	y := []float32{
		0.7, 0.3, 0,
		0.1, 0.9, 0,
		0.5, 0.5, 0,
	}
	got, err := Reconstruct(x, 4, y, 3)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 3; c++ {
		colSum := 0.0
		for i := 0; i < 3; i++ {
			colSum += float64(y[i*3+c])
		}
		for p := 0; p < 4; p++ {
			dot := 0.0
			for i := 0; i < 3; i++ {
				dot += float64(y[i*3+c]) * x[i*4+p]
			}
			want := 0.0
			if colSum > 0 {
				want = dot / colSum
			}
			if math.Abs(got[c][p]-want) > 1e-12 {
				t.Fatalf("class %d pixel %d: %v, want %v", c, p, got[c][p], want)
			}
		}
	}
	// Class 0 by hand: (0.7·x0 + 0.1·x1 + 0.5·x2) / 1.3 at pixel 0 = (0 + 0.1 + 0.15) / 1.3.
	if v := got[0][0]; math.Abs(v-0.25/1.3) > 1e-7 {
		t.Fatalf("class 0 pixel 0: %v", v)
	}
	if _, err := Reconstruct(x, 4, y[:8], 3); err == nil {
		t.Fatal("mismatched label count accepted")
	}
}

func TestPixelsAndLabelAnalysis(t *testing.T) {
	norm := artifact.Normalisation{Mean: []float64{0.1307}, Std: []float64{0.3081}}
	p, err := Pixels([]float32{float32((0 - 0.1307) / 0.3081), float32((1 - 0.1307) / 0.3081), 10}, 1, 3, norm)
	if err != nil || math.Abs(p[0]) > 1e-6 || math.Abs(p[1]-1) > 1e-6 || p[2] != 1 {
		t.Fatalf("pixels %v, %v", p, err)
	}
	labels := []float32{
		0.8, 0.2,
		0.4, 0.6,
		0.1, 0.9,
	}
	d, err := MeanLabelPerClass(labels, 2, []int64{0, 0, 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Count[0] != 2 || math.Abs(d.Mean[0][0]-0.6) > 1e-6 || math.Abs(d.Mean[1][1]-0.9) > 1e-6 {
		t.Fatalf("distribution %+v", d)
	}
	if k := Recovered(labels, 2, []int64{0, 0, 1}); k != 2 {
		t.Fatalf("recovered %d, want 2", k)
	}
	// Each row's arg-max; of equal maxima the first.
	if got := ArgMaxClasses([]float32{0.2, 0.5, 0.3, 0.4, 0.4, 0.2, 0, 0, 1}, 3); !slices.Equal(got, []int64{1, 0, 2}) {
		t.Fatalf("arg-max classes %v, want [1 0 2]", got)
	}
}

// tinyRun distils a few meta-steps on real data and writes its artifact and history.
func tinyRun(t *testing.T, shared, target, source string) string {
	t.Helper()
	prev := torch.NumThreads()
	t.Cleanup(func() { _ = torch.SetNumThreads(prev) })
	cfg := config.Default()
	cfg.Dataset, cfg.Source, cfg.DataDir, cfg.Method = target, source, shared, config.MethodRR
	cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch, cfg.TargetSetSize = 20, 10, 256, 1024
	cfg.Epochs, cfg.ValidateEvery, cfg.ResetWindow, cfg.EvalModels = 3, 1, 2, 2
	cfg.Threads, cfg.GradVarWindow = 1, 3
	if source == target {
		cfg.Baselines = []string{config.BaselineTrue}
		cfg.BaselineMaxSteps = 50
	} else {
		cfg.Baselines = []string{config.BaselineTeacher}
		cfg.TeacherSteps = 50
	}
	out := t.TempDir()
	res, err := labeldistill.Distill(context.Background(), cfg, labeldistill.WithHistory(filepath.Join(out, rundir.HistoryFile)))
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Write(out, res); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPNG requires a decodable PNG of sensible size whose pixels are not all one colour
// and not mostly background.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: not a PNG: %v", path, err)
	}
	r := img.Bounds()
	if r.Dx() < 250 || r.Dy() < 200 || r.Dx() > 4000 || r.Dy() > 4000 {
		t.Fatalf("%s: %d×%d pixels", path, r.Dx(), r.Dy())
	}
	colours := map[[3]uint32]bool{}
	inked := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			colours[[3]uint32{cr >> 8, cg >> 8, cb >> 8}] = true
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				inked++
			}
		}
	}
	if frac := float64(inked) / float64(r.Dx()*r.Dy()); len(colours) < 16 || frac < 0.02 {
		t.Fatalf("%s: %d colours, %.1f%% non-background pixels: no real content", path, len(colours), 100*frac)
	}
	t.Logf("%s: %d×%d, %d colours, %.0f%% ink", filepath.Base(path), r.Dx(), r.Dy(), len(colours), 100*float64(inked)/float64(r.Dx()*r.Dy()))
}

var reRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

// TestWriteReportRealRuns: within MNIST and KMNIST → MNIST, every figure is a real PNG
// and report.html references only files that exist.
func TestWriteReportRealRuns(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(filepath.Join(shared, "mnist")); err != nil {
		t.Skipf("no shared datasets: %v", err)
	}
	for _, tc := range []struct {
		target, source string
		want           []string
	}{
		{"mnist", "mnist", []string{"label_distribution.png", "example_labels.png", "reconstructions.png", "learning_curves.png", "accuracy.png", "gradient_variance.png"}},
		{"mnist", "kmnist", []string{"label_distribution.png", "example_labels.png", "reconstructions.png", "learning_curves.png", "accuracy.png", "gradient_variance.png"}},
	} {
		t.Run(tc.source+"→"+tc.target, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(shared, tc.source)); err != nil {
				t.Skipf("no %s in %s", tc.source, shared)
			}
			dir := tinyRun(t, shared, tc.target, tc.source)
			var ddr *artifact.DDRankingResult
			if tc.source == tc.target {
				ddr = writeDDRanking(t, dir)
			}
			res, err := Write(dir, Options{DataDir: shared})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range res.Figures {
				names = append(names, f.Name)
				checkPNG(t, filepath.Join(dir, FiguresDir, f.Name))
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("figures %v, want %v", names, tc.want)
			}
			if len(res.Notes) > 0 {
				t.Fatalf("notes: %v", res.Notes)
			}
			html, err := os.ReadFile(res.HTML)
			if err != nil {
				t.Fatal(err)
			}
			refs := reRef.FindAllStringSubmatch(string(html), -1)
			if len(refs) < len(tc.want)+2 {
				t.Fatalf("report.html has only %d references", len(refs))
			}
			for _, m := range refs {
				if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "/") {
					t.Fatalf("report.html references %q outside the folder", m[1])
				}
				if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
					t.Fatalf("report.html references %q, which does not exist", m[1])
				}
			}
			if (tc.source == tc.target) != (res.Recovered >= 0) {
				t.Fatalf("recovered %d for %s → %s", res.Recovered, tc.source, tc.target)
			}
			// The benchmark evaluation, where there is one, is in the report.
			if !reflect.DeepEqual(res.DDRanking, ddr) {
				t.Fatalf("DDRanking %+v, want %+v", res.DDRanking, ddr)
			}
			for _, want := range []string{"Benchmark protocol", "0.1900", "0.0500", "0.2402", "0.9900"} {
				if has := strings.Contains(string(html), want); has != (ddr != nil) {
					t.Errorf("report.html contains %q: %v; the folder has an evaluation: %v", want, has, ddr != nil)
				}
			}
			if ddr != nil {
				path := filepath.Join(dir, artifact.EvaluationsFolder, artifact.DDRankingFile)
				if err := os.WriteFile(path, []byte(`{"protocol": "ddranking",`), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := Write(dir, Options{DataDir: shared}); err == nil || !strings.Contains(err.Error(), path) {
					t.Errorf("a truncated %s: error %v, want one naming it", artifact.DDRankingFile, err)
				}
			}
		})
	}
}

// writeDDRanking writes an evaluations/ddranking.json with known numbers into dir.
func writeDDRanking(t *testing.T, dir string) *artifact.DDRankingResult {
	t.Helper()
	hlr, ior, score := artifact.DDRankingScores(0.99, 0.80, 0.90, 0.85)
	labels := func(acc float64) artifact.DDRankingLabels {
		return artifact.DDRankingLabels{Images: 20, Accuracies: []float64{acc}, Mean: acc, LRs: []float64{0.01}, Epochs: []int{20}, Validation: []float64{acc}}
	}
	r := &artifact.DDRankingResult{Protocol: artifact.ProtocolDDRanking, Dataset: "mnist", Arch: "convnet", Models: 1, Seed: 1234,
		HLR: hlr, IOR: ior, Score: score, Runs: []artifact.DDRankingRun{{HLR: hlr, IOR: ior, Score: score}},
		HardLabel: labels(0.80), SoftLabel: labels(0.90), RandomSoftLabel: labels(0.85),
		FullData: artifact.DDRankingFullData{Accuracy: 0.99, Images: 1024}}
	r.Recipe, r.FullDataRecipe = artifact.DDRankingConfig{Augment: artifact.AugmentDSA}.DDRankingRecipes()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, artifact.EvaluationsFolder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, artifact.EvaluationsFolder, artifact.DDRankingFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWriteReportNeedsArtifact: a folder without an artifact is an error naming the file.
func TestWriteReportNeedsArtifact(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, Options{}); err == nil || !strings.Contains(err.Error(), artifact.DistilledFile) {
		t.Fatalf("got %v", err)
	}
}

// TestHistoryMismatch: a history of another run, or of a run that has not finished with
// this artifact, is not drawn as this artifact's.
func TestHistoryMismatch(t *testing.T) {
	rep := &artifact.Report{Method: "rr", Target: "mnist", Seed: 1, BaseExamples: 100, Record: labeldistill.Record{TestMean: 85}}
	start := rundir.HistoryRecord{Kind: rundir.HistoryStart, Method: "rr", Dataset: "mnist", Seed: 1, BaseExamples: 100}
	test := rundir.HistoryRecord{Kind: rundir.HistoryPhase, Name: "test", Mean: 85}
	if why := historyMismatch([]rundir.HistoryRecord{start, test}, rep); why != "" {
		t.Fatalf("own history refused: %s", why)
	}
	if historyMismatch([]rundir.HistoryRecord{start}, rep) == "" {
		t.Fatal("an unfinished history accepted")
	}
	other := start
	other.Seed = 2
	if historyMismatch([]rundir.HistoryRecord{other, test}, rep) == "" {
		t.Fatal("another seed's history accepted")
	}
}

// TestGradVarianceFigureOneLine: a short run's history may hold a single step line; its
// log-scale panels must still draw (gonum widened a one-value range below zero and failed
// the whole report with "Values must be greater than 0 for a log scale").
func TestGradVarianceFigureOneLine(t *testing.T) {
	recs := []rundir.HistoryRecord{{Kind: rundir.HistoryStep, Step: 50, GradNorm: 2.1e-4,
		GradVar: &engine.GradVariance{Count: 50, Variance: 1.9e-9, MeanSquare: 2.4e-9}}}
	png, err := gradVarianceFigure(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gradient_variance.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
}

// TestRowTitlesLineUp: the titles of a row of panels start at one height. gonum draws each
// title at its own canvas top, which plot.Align moves by the plot's own overhang; the
// gradient-variance figure's three panels had their titles at three heights.
func TestRowTitlesLineUp(t *testing.T) {
	recs := []rundir.HistoryRecord{
		{Kind: rundir.HistoryStep, Step: 50, GradNorm: 2.1e-4, GradVar: &engine.GradVariance{Count: 50, Variance: 1.9e-9, MeanSquare: 2.4e-9}},
		{Kind: rundir.HistoryStep, Step: 100, GradNorm: 1.5e-4, GradVar: &engine.GradVariance{Count: 50, Variance: 1.1e-9, MeanSquare: 1.6e-9}},
	}
	measured := &GradVarFile{Labels: "distilled", Models: 3, Warmup: 10, Methods: []gradvar.Method{
		{Name: "LD", Variance: engine.GradVariance{Count: 3, Variance: 1.67e-9}},
		{Name: "LD RR", Variance: engine.GradVariance{Count: 3, Variance: 1.42e-10}},
	}}
	buf, err := gradVarianceFigure(recs, measured)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	// The first row with ink in each third of the image (one panel each) is its title's top.
	b := img.Bounds()
	panels := 3
	tops := make([]int, panels)
	for i := range tops {
		tops[i] = -1
		x0, x1 := b.Min.X+i*b.Dx()/panels, b.Min.X+(i+1)*b.Dx()/panels
	rows:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := x0; x < x1; x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r+g+bl < 3*0x8000 {
					tops[i] = y
					break rows
				}
			}
		}
	}
	for i, top := range tops {
		if d := top - tops[0]; d < -1 || d > 1 {
			t.Errorf("title tops at rows %v: panel %d is %d px off the first", tops, i, d)
		}
		if top < 0 || top > b.Dy()/10 {
			t.Errorf("panel %d: no title at the top (first ink at row %d of %d)", i, top, b.Dy())
		}
	}
}

// TestCompactTickLabels: tick labels without trailing zeros after the point, and at most 4
// significant digits for very large values; the values themselves are gonum's.
func TestCompactTickLabels(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 1250, []string{"0", "400", "800", "1200"}},
		{250, 1250, []string{"250", "750", "1250"}},
		{0.5, 2.25, []string{"0.5", "1", "1.5", "2"}},
		{0, 1e38, []string{"0", "1e+38"}},
	} {
		var got []string
		for _, tk := range (compactTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label == "" {
				continue
			}
			got = append(got, tk.Label)
			if strings.Contains(tk.Label, ".") && strings.HasSuffix(tk.Label, "0") {
				t.Errorf("ticks of [%g, %g]: label %q keeps a trailing zero", tc.lo, tc.hi, tk.Label)
			}
		}
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("ticks of [%g, %g]: labels %q, want %q among them", tc.lo, tc.hi, got, w)
			}
		}
	}
}

// TestResumePoints: each resume line of a history is marked at the meta-step it went on
// from, at the T of the last step line before it.
func TestResumePoints(t *testing.T) {
	h := []rundir.HistoryRecord{
		{Kind: rundir.HistoryStart},
		{Kind: rundir.HistoryResume, Step: 0},
		{Kind: rundir.HistoryStep, Step: 1, T: 1},
		{Kind: rundir.HistoryStep, Step: 2, T: 2},
		{Kind: rundir.HistoryValidation, Step: 2, T: 9},
		{Kind: rundir.HistoryResume, Step: 2},
		{Kind: rundir.HistoryStep, Step: 3, T: 3},
		{Kind: rundir.HistoryResume, Step: 3},
	}
	got := resumePoints(h)
	want := [][2]float64{{0, 0}, {2, 2}, {3, 3}}
	if len(got) != len(want) {
		t.Fatalf("resume points %v, want %v", got, want)
	}
	for i, p := range got {
		if p.X != want[i][0] || p.Y != want[i][1] {
			t.Fatalf("resume points %v, want %v", got, want)
		}
	}
}

// TestImagesShown: the learnt-image grid says how many images it leaves out.
func TestImagesShown(t *testing.T) {
	classOf := []int64{0, 0, 0, 1, 2, 2, 2, 2, 3}
	for _, c := range []struct{ rows, perRow, want int }{{4, 10, 9}, {4, 2, 6}, {2, 2, 3}, {3, 1, 3}} {
		if got := imagesShown(classOf, c.rows, c.perRow); got != c.want {
			t.Errorf("rows %d, %d a row: %d shown, want %d", c.rows, c.perRow, got, c.want)
		}
	}
}
