package artifact

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// smallResult is a 4-image MNIST-shaped result (no training needed to write an artifact).
func smallResult(t *testing.T, method string) *labeldistill.Result {
	t.Helper()
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.BaseSelection = method, 4, config.SelectUnbalanced
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	n, classes := 4, 10
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 3, MetaSteps: 3}, Classes: classes, BaseShape: [4]int64{4, 1, 28, 28},
		BaseImages: make([]float32, n*28*28), BaseIndices: []int64{5, 7, 11, 13}, BaseClasses: []int64{3, 1, 4, 1},
		Labels: make([]float32, n*classes)}
	for i := range res.BaseImages {
		res.BaseImages[i] = float32(i%7) / 7
	}
	for i := 0; i < n; i++ {
		res.Labels[i*classes+int(res.BaseClasses[i])] = 1
	}
	return res
}

// TestArtifactDescribesItself: base classes, class names, normalisation, the recipe and
// the versions survive a write and a read.
func TestArtifactDescribesItself(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, smallResult(t, config.MethodRR)); err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := a.Report
	switch {
	case !reflect.DeepEqual(a.BaseClasses, []int64{3, 1, 4, 1}) || !reflect.DeepEqual(r.BaseClasses, a.BaseClasses):
		t.Fatalf("base classes %v / %v", a.BaseClasses, r.BaseClasses)
	case r.SchemaVersion != Schema || r.LdtorchVersion != labeldistill.Version:
		t.Fatalf("schema %d, version %q", r.SchemaVersion, r.LdtorchVersion)
	case len(r.ClassNames) != 10 || r.ClassNames[3] != "3" || len(r.SourceClassNames) != 10:
		t.Fatalf("class names %v / %v", r.ClassNames, r.SourceClassNames)
	case !reflect.DeepEqual(r.Normalisation.Mean, []float64{0.1307}) || !reflect.DeepEqual(r.Normalisation.Std, []float64{0.3081}):
		t.Fatalf("normalisation %+v", r.Normalisation)
	case r.TrainingRecipe.Steps != 3 || r.TrainingRecipe.Optimizer != "adam" || r.TrainingRecipe.LR != 1e-3 ||
		r.TrainingRecipe.Batch != 4 || r.TrainingRecipe.Arch != "lenet" || r.TrainingRecipe.RidgeLambda != 1 ||
		!strings.Contains(r.TrainingRecipe.Head, "ridge"):
		t.Fatalf("recipe %+v", r.TrainingRecipe)
	}
}

// TestRetrainSnippetRuns runs docs/ARTIFACT.md's PyTorch snippet on an artifact (skipped
// where python3 lacks numpy or torch).
func TestRetrainSnippetRuns(t *testing.T) {
	py := pythonTorch(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARTIFACT.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- retrain-snippet: begin -->\n```python\n")
	code, _, ok2 := strings.Cut(rest, "```\n<!-- retrain-snippet: end -->")
	if !ok1 || !ok2 {
		t.Fatal("docs/ARTIFACT.md: retrain snippet markers not found")
	}
	dir := t.TempDir()
	if err := Write(dir, smallResult(t, config.MethodLD)); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "retrain.py")
	if err := os.WriteFile(script, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("snippet failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "trained 3 steps on 4 images, 10 classes") {
		t.Fatalf("snippet printed %q", out)
	}
}
