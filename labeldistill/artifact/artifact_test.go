package artifact

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
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

// ddResult is smallResult as method dd writes it: 20 learnt images (2 steps × 2 epochs,
// one image per class per step), no base indices, step sizes.
func ddResult(t *testing.T) *labeldistill.Result {
	t.Helper()
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.DDSteps, cfg.DDEpochs = config.MethodDD, 20, 2, 2
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	n, classes := 20, 10
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 4, MetaSteps: 8}, Classes: classes, BaseShape: [4]int64{20, 1, 28, 28},
		BaseImages: make([]float32, n*28*28), BaseClasses: make([]int64, n), Labels: make([]float32, n*classes),
		StepLRs: []float32{0.03, 0.021, 0.018, 0.05}}
	for i := range res.BaseImages {
		res.BaseImages[i] = float32(i%11)/5 - 1
	}
	for i := 0; i < n; i++ {
		res.BaseClasses[i] = int64(i % classes)
		res.Labels[i*classes+i%classes] = 1
	}
	return res
}

// TestDDArtifact: method dd's step sizes and what was learnt survive a write and a read;
// evaluation trains with its recipe (the step sizes in their order) unless a setting of
// the standard recipe is given; a report of method dd without step sizes is refused.
func TestDDArtifact(t *testing.T) {
	dir := t.TempDir()
	res := ddResult(t)
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := a.Report
	if !reflect.DeepEqual(a.StepLRs, res.StepLRs) || !reflect.DeepEqual(r.Learnt, []string{LearntImages, LearntStepLRs}) ||
		!r.LearntImages() || len(a.BaseIndices) != 0 || r.TrainingRecipe.Batch != 10 || !strings.Contains(r.TrainingRecipe.Sampling, "fixed order") {
		t.Fatalf("step sizes %v, learnt %v, base indices %v, recipe %+v", a.StepLRs, r.Learnt, a.BaseIndices, r.TrainingRecipe)
	}
	ec, err := EvalConfig{Models: 2}.Resolved(a)
	if err != nil || ec.Recipe != RecipeDD || ec.Steps != 4 || ec.Batch != 10 || *ec.RR {
		t.Fatalf("auto recipe: %+v, %v", ec, err)
	}
	if ec, err := (EvalConfig{Optimizer: "sgd"}).Resolved(a); err != nil || ec.Recipe != RecipeStandard || ec.Steps != 4 {
		t.Fatalf("with an optimizer: %+v, %v", ec, err)
	}
	if _, err := (EvalConfig{Recipe: RecipeDD, Steps: 7}).Resolved(a); err == nil || !strings.Contains(err.Error(), "recipe: dd trains with the artifact's step sizes") {
		t.Fatalf("recipe dd with steps: %v", err)
	}
	// Evaluation on a test split (random images: the accuracy is not the point, the recipe is).
	test := &data.Split{N: 64, C: 1, H: 28, W: 28, Classes: 10, Images: make([]float32, 64*784), Labels: make([]int64, 64)}
	for i := range test.Images {
		test.Images[i] = float32(i%13) / 13
	}
	for i := range test.Labels {
		test.Labels[i] = int64(i % 10)
	}
	out, err := Evaluate(context.Background(), a, test, EvalConfig{Models: 2})
	if err != nil || out.Recipe != RecipeDD || out.Steps != 4 || len(out.Accuracies) != 2 {
		t.Fatalf("evaluate: %+v, %v", out, err)
	}

	// An LD artifact has no dd recipe; a dd report without step sizes is refused.
	ld := t.TempDir()
	if err := Write(ld, smallResult(t, config.MethodLD)); err != nil {
		t.Fatal(err)
	}
	la, err := Read(ld)
	if err != nil || la.Report.LearntImages() || !reflect.DeepEqual(la.Report.Learnt, []string{LearntLabels}) {
		t.Fatalf("LD artifact: %v, learnt %v", err, la.Report.Learnt)
	}
	if _, err := (EvalConfig{Recipe: RecipeDD}).Resolved(la); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Fatalf("recipe dd on an LD artifact: %v", err)
	}
	res.StepLRs = nil
	if err := Write(t.TempDir(), res); err == nil || !strings.Contains(err.Error(), "0 step sizes") {
		t.Fatalf("writing method dd without step sizes: %v", err)
	}
}

// TestDDEvalConfigResolvedTwice: a resolved EvalConfig of the dd recipe resolves to itself.
func TestDDEvalConfigResolvedTwice(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, ddResult(t)); err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	once, err := EvalConfig{}.Resolved(a)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := once.Resolved(a)
	if err != nil || !reflect.DeepEqual(once, twice) {
		t.Fatalf("resolved again: %+v (%v), once %+v", twice, err, once)
	}
}
