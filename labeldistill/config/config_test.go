package config

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDefaultsMatchAlgorithm pins every constant of docs/ALGORITHM.md to its default.
func TestDefaultsMatchAlgorithm(t *testing.T) {
	c := Default()
	want := Config{
		Method: "ld", Dataset: "mnist", BaseExamples: 100,
		OuterBatch:         1024,                   // §4
		InnerLR:            0.01,                   // §4
		ModelLR:            1e-3,                   // §4
		ModelBetas:         [2]float64{0.9, 0.999}, // PyTorch Adam
		ModelEps:           1e-8,
		LabelLR:            1e-3, // §3
		LabelBetas:         [2]float64{0.9, 0.999},
		LabelEps:           1e-8,
		RidgeLambda:        1.0,  // §5
		RidgePseudoStep:    0.01, // §5
		ScaleLR:            0.01, // §5
		ScaleInit:          1.0,  // §5
		ResetMeanOfLast:    3,    // §6
		ValidateEvery:      5,    // §7
		EvalModels:         20,   // §7
		EvalLR:             1e-3, // §7
		Seed:               1234,
		LabelSmoothing:     0.1, // §8
		TeacherSteps:       2000,
		TeacherBatch:       256,
		TeacherLR:          1e-3,
		TeacherTemperature: 1,
		Device:             "cpu",
		DataDir:            "",
		Out:                "out",
	}
	if d := DiffDetails(c, want); len(d) != 0 {
		t.Fatalf("defaults differ from docs/ALGORITHM.md:\n%s", strings.Join(d, "\n"))
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

func TestResolvedAutoValues(t *testing.T) {
	type want struct {
		inner, epochs, window, baseMax int
		arch, sel                      string
		baselines                      []string
		val                            int
	}
	within := []string{"true", "smooth", "teacher"}
	cases := []struct {
		dataset, source string
		n               int
		want            want
	}{
		{"mnist", "", 10, want{10, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"mnist", "", 20, want{10, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"mnist", "", 50, want{25, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"mnist", "", 100, want{50, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"mnist", "mnist", 200, want{50, 800, 200, 1700, "lenet", "balanced", within, 10000}},
		{"mnist", "", 500, want{50, 800, 200, 1700, "lenet", "balanced", within, 10000}},
		{"mnist", "", 30, want{15, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"mnist", "", 90, want{45, 400, 50, 1000, "lenet", "balanced", within, 10000}},
		{"cifar10", "", 100, want{50, 400, 50, 1000, "alexnet", "balanced", within, 5000}},
		{"cifar100", "", 100, want{100, 800, 100, 1000, "alexnet", "balanced", within, 5000}},
		{"cifar100", "", 500, want{100, 800, 100, 1700, "alexnet", "balanced", within, 5000}},
		{"k49", "emnist", 100, want{50, 100, 100, 1000, "lenet", "unbalanced", []string{"teacher"}, 23237}},
		{"k49", "emnist", 500, want{50, 200, 100, 1700, "lenet", "unbalanced", []string{"teacher"}, 23237}},
		{"mnist", "emnist-letters", 100, want{50, 400, 50, 1000, "lenet", "unbalanced", []string{"teacher"}, 10000}},
		{"kmnist", "emnist", 5, want{5, 400, 50, 1000, "lenet", "unbalanced", []string{"teacher"}, 10000}},
		{"cifar10", "cub", 100, want{50, 400, 50, 1000, "alexnet", "unbalanced", []string{"teacher"}, 5000}},
		{"fashion-mnist", "", 10, want{10, 400, 50, 1000, "lenet", "balanced", within, 10000}},
	}
	for _, tc := range cases {
		c := Default()
		c.Dataset, c.Source, c.BaseExamples = tc.dataset, tc.source, tc.n
		r, err := c.Resolved()
		if err != nil {
			t.Errorf("%s←%q N=%d: %v", tc.dataset, tc.source, tc.n, err)
			continue
		}
		got := want{r.InnerBatch, r.Epochs, r.ResetWindow, r.BaselineMaxSteps, r.Arch, r.BaseSelection, r.Baselines, r.ValidationSize}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s←%q N=%d: got %+v, want %+v", tc.dataset, tc.source, tc.n, got, tc.want)
		}
		if r.EvalBatch != r.InnerBatch || r.EvalArch != r.Arch {
			t.Errorf("%s N=%d: eval_batch %d / eval_arch %q not defaulted from inner_batch / arch", tc.dataset, tc.n, r.EvalBatch, r.EvalArch)
		}
		if !reflect.DeepEqual(r.BaselineSteps, BaselineStepGrid(r.BaselineMaxSteps)) {
			t.Errorf("%s N=%d: baseline_steps %v", tc.dataset, tc.n, r.BaselineSteps)
		}
		if r.Source == "" || r.IsCrossDataset() != (tc.source != "" && tc.source != tc.dataset) {
			t.Errorf("%s←%q: source resolved to %q, cross %v", tc.dataset, tc.source, r.Source, r.IsCrossDataset())
		}
	}
}

func TestResolvedNormalisationAndNames(t *testing.T) {
	c := Default()
	c.Dataset, c.Source = "mnist", "emnist"
	r, err := c.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "emnist-letters" || r.NumClasses() != 10 {
		t.Errorf("source %q classes %d", r.Source, r.NumClasses())
	}
	if !reflect.DeepEqual(r.NormMean, []float64{0.1307}) || !reflect.DeepEqual(r.NormStd, []float64{0.3081}) {
		t.Errorf("greyscale norm %v %v", r.NormMean, r.NormStd)
	}
	c = Default()
	c.Dataset = "cifar10"
	r, err = c.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	wantMean := []float64{125.3 / 255, 123.0 / 255, 113.9 / 255}
	wantStd := []float64{63.0 / 255, 62.1 / 255, 66.7 / 255}
	if !reflect.DeepEqual(r.NormMean, wantMean) || !reflect.DeepEqual(r.NormStd, wantStd) {
		t.Errorf("colour norm %v %v", r.NormMean, r.NormStd)
	}
	// Resolving must not alias the package's tables.
	r.NormMean[0] = 99
	r2, _ := c.Resolved()
	if r2.NormMean[0] != 125.3/255 {
		t.Fatal("Resolved returned a slice aliasing the default table")
	}
}

func TestResolvedKeepsExplicitValues(t *testing.T) {
	c := Default()
	c.Dataset, c.BaseExamples = "cifar100", 100
	c.InnerBatch, c.Epochs, c.ResetWindow, c.BaselineMaxSteps = 20, 7, 9, 300
	c.BaselineSteps = []int{5, 300}
	c.Arch, c.EvalArch, c.EvalBatch = "lenet", "resnet", 30
	c.BaseSelection = "unbalanced"
	c.Baselines = []string{"none"}
	c.ValidationSize = 123
	c.NormMean, c.NormStd = []float64{0, 0, 0}, []float64{1, 1, 1}
	r, err := c.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if r.InnerBatch != 20 || r.Epochs != 7 || r.ResetWindow != 9 || r.BaselineMaxSteps != 300 ||
		!reflect.DeepEqual(r.BaselineSteps, []int{5, 300}) || r.Arch != "lenet" || r.EvalArch != "resnet" ||
		r.EvalBatch != 30 || r.BaseSelection != "unbalanced" || r.ValidationSize != 123 ||
		!reflect.DeepEqual(r.NormStd, []float64{1, 1, 1}) {
		t.Fatalf("explicit values overwritten: %+v", r)
	}
	if r.Baselines == nil || len(r.Baselines) != 0 {
		t.Fatalf(`baselines ["none"] resolved to %#v, want []`, r.Baselines)
	}
	// An explicit empty list is "none" too, and survives a second resolution.
	c.Baselines = []string{}
	r, _ = c.Resolved()
	r2, err := r.Resolved()
	if err != nil || r2.Baselines == nil || len(r2.Baselines) != 0 {
		t.Fatalf("baselines [] → %#v, %v", r2.Baselines, err)
	}
}

func TestResolvedIsIdempotent(t *testing.T) {
	for _, ds := range []string{"mnist", "k49", "cifar100", "cifar10"} {
		c := Default()
		c.Dataset = ds
		if ds == "k49" {
			c.Source = "emnist"
		}
		r, err := c.Resolved()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := r.Resolved()
		if err != nil {
			t.Fatal(err)
		}
		if d := Diff(r, r2); len(d) != 0 {
			t.Errorf("%s: second resolution changed %v", ds, d)
		}
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // the whole sentence of one error
	}{
		{"negative N", func(c *Config) { c.BaseExamples = -3 }, "base_examples: must be positive, got -3"},
		{"inner too big", func(c *Config) { c.InnerBatch = 150 }, "inner_batch: 150 exceeds base_examples 100"},
		{"inner negative", func(c *Config) { c.InnerBatch = -1 }, "inner_batch: must be positive, got -1"},
		{"eval batch too big", func(c *Config) { c.EvalBatch = 101 }, "eval_batch: 101 exceeds base_examples 100"},
		{"outer", func(c *Config) { c.OuterBatch = 0 }, "outer_batch: must be positive, got 0"},
		{"dataset", func(c *Config) { c.Dataset = "svhn" }, `dataset: unknown dataset "svhn" (known: mnist, fashion-mnist, kmnist, emnist-letters, k49, cifar10, cifar100, cub, imagefolder:PATH)`},
		{"empty dataset", func(c *Config) { c.Dataset = "" }, "dataset: must name the target dataset (one of mnist, fashion-mnist, kmnist, emnist-letters, k49, cifar10, cifar100, cub)"},
		{"cub target", func(c *Config) { c.Dataset = "cub"; c.Source = "" }, "dataset: cub can only be a source, not a target"},
		{"source", func(c *Config) { c.Source = "imagenet" }, `source: unknown dataset "imagenet" (known: mnist, fashion-mnist, kmnist, emnist-letters, k49, cifar10, cifar100, cub, imagefolder:PATH)`},
		{"colour mismatch", func(c *Config) { c.Source = "cifar10" }, "source: cifar10 is colour but dataset mnist is greyscale"},
		{"method", func(c *Config) { c.Method = "dc" }, `method: unknown method "dc" (want "ld", "rr" or "dd")`},
		{"NaN lr", func(c *Config) { c.LabelLR = math.NaN() }, "label_lr: must be a positive finite number, got NaN"},
		{"Inf lr", func(c *Config) { c.ModelLR = math.Inf(1) }, "model_lr: must be a positive finite number, got +Inf"},
		{"negative lr", func(c *Config) { c.InnerLR = -0.01 }, "inner_lr: must be a positive finite number, got -0.01"},
		{"zero scale lr", func(c *Config) { c.ScaleLR = 0 }, "scale_lr: must be a positive finite number, got 0"},
		{"eval lr", func(c *Config) { c.EvalLR = -1 }, "eval_lr: must be a positive finite number, got -1"},
		{"teacher lr", func(c *Config) { c.TeacherLR = math.NaN() }, "teacher_lr: must be a positive finite number, got NaN"},
		{"lambda", func(c *Config) { c.RidgeLambda = 0 }, "ridge_lambda: must be a positive finite number, got 0"},
		{"eps", func(c *Config) { c.LabelEps = -1e-8 }, "label_eps: must be a positive finite number, got -1e-08"},
		{"betas", func(c *Config) { c.LabelBetas = [2]float64{0.9, 1} }, "label_betas: each beta must be in [0, 1), got [0.9 1]"},
		{"model betas", func(c *Config) { c.ModelBetas[0] = math.NaN() }, "model_betas: each beta must be in [0, 1), got [NaN 0.999]"},
		{"pseudo step", func(c *Config) { c.RidgePseudoStep = 1.5 }, "ridge_pseudo_step: must be in (0, 1], got 1.5"},
		{"scale init", func(c *Config) { c.ScaleInit = -1 }, "scale_init: must be a positive finite number, got -1"},
		{"epochs", func(c *Config) { c.Epochs = -1 }, "epochs: must be positive, got -1"},
		{"window", func(c *Config) { c.ResetWindow = -50 }, "reset_window: must be positive, got -50"},
		{"mean of last", func(c *Config) { c.ResetMeanOfLast = 0 }, "reset_mean_of_last: must be positive, got 0"},
		{"validate every", func(c *Config) { c.ValidateEvery = 0 }, "validate_every: must be positive, got 0"},
		{"eval models", func(c *Config) { c.EvalModels = 0 }, "eval_models: must be between 1 and 1000, got 0 (each model trains for T steps and is scored on the test set)"},
		{"target set", func(c *Config) { c.TargetSetSize = -100 }, "target_set_size: must be 0 (all) or positive, got -100"},
		{"validation size", func(c *Config) { c.ValidationSize = -1 }, "validation_size: must be positive, got -1"},
		{"norm channels", func(c *Config) { c.NormMean = []float64{0.5, 0.5, 0.5} }, "norm_mean: needs 1 value(s) for the 1 channel(s) of mnist, got 3"},
		{"norm std", func(c *Config) { c.NormStd = []float64{0} }, "norm_std: values must be finite and positive, got [0]"},
		{"arch", func(c *Config) { c.Arch = "vgg" }, `arch: unknown architecture "vgg" (want lenet, alexnet, resnet, convnet or torchscript:FILE)`},
		{"alexnet grey", func(c *Config) { c.Arch = "alexnet" }, "arch: alexnet needs colour 32×32 images but dataset mnist is greyscale"},
		{"eval arch grey", func(c *Config) { c.EvalArch = "alexnet" }, "eval_arch: alexnet needs colour 32×32 images but dataset mnist is greyscale"},
		{"eval arch", func(c *Config) { c.EvalArch = "mlp" }, `eval_arch: unknown architecture "mlp" (want lenet, alexnet, resnet, convnet or torchscript:FILE)`},
		{"balanced divisibility", func(c *Config) { c.BaseExamples = 25 }, "base_selection: balanced needs base_examples divisible by the 10 classes of mnist, got 25"},
		{"balanced cross", func(c *Config) { c.Source = "emnist"; c.BaseSelection = "balanced" }, "base_selection: cross-dataset distillation (source emnist-letters, dataset mnist) requires unbalanced, got balanced"},
		{"selection", func(c *Config) { c.BaseSelection = "random" }, `base_selection: unknown selection "random" (want balanced, unbalanced, or given with base_indices)`},
		{"baseline unknown", func(c *Config) { c.Baselines = []string{"true", "oracle"} }, `baselines: unknown baseline "oracle" (want true, smooth, teacher or none)`},
		{"baseline twice", func(c *Config) { c.Baselines = []string{"smooth", "smooth"} }, `baselines: "smooth" is listed twice`},
		{"baseline cross", func(c *Config) { c.Source = "emnist"; c.Baselines = []string{"true"} }, `baselines: "true" needs within-dataset distillation, but source emnist-letters differs from dataset mnist`},
		{"baseline none+", func(c *Config) { c.Baselines = []string{"none", "true"} }, `baselines: "none" cannot be combined with other baselines, got ["none" "true"]`},
		{"smoothing", func(c *Config) { c.LabelSmoothing = 1.1 }, "label_smoothing: must be in [0, 1], got 1.1"},
		{"baseline max", func(c *Config) { c.BaselineMaxSteps = -1 }, "baseline_max_steps: must be positive, got -1"},
		{"baseline steps order", func(c *Config) { c.BaselineSteps = []int{10, 10} }, "baseline_steps: must be positive and strictly increasing, got [10 10]"},
		{"baseline steps max", func(c *Config) { c.BaselineSteps = []int{10, 2000} }, "baseline_steps: 2000 exceeds baseline_max_steps 1000"},
		{"baseline steps empty", func(c *Config) { c.BaselineSteps = []int{} }, "baseline_steps: must list at least one step count"},
		{"teacher steps", func(c *Config) { c.TeacherSteps = 0 }, "teacher_steps: must be positive, got 0"},
		{"teacher temperature", func(c *Config) { c.TeacherTemperature = 0 }, "teacher_temperature: must be a positive finite number, got 0"},
		{"device", func(c *Config) { c.Device = "gpu" }, `device: unknown device "gpu" (want cpu, cuda or cuda:N)`},
		{"device index", func(c *Config) { c.Device = "cuda:01" }, `device: unknown device "cuda:01" (want cpu, cuda or cuda:N)`},
		{"threads", func(c *Config) { c.Threads = -2 }, fmt.Sprintf("threads: must be between 1 and %d, got -2 (4 × the CPUs here; 0: libtorch's default)", MaxThreads())},
		{"out", func(c *Config) { c.Out = "" }, "out: must not be empty"},
		{"learn", func(c *Config) { c.Learn = "pixels" }, `learn: unknown value "pixels" (want labels, images or both)`},
		{"learn dd", func(c *Config) { c.Method = MethodDD; c.Learn = LearnBoth }, "learn: method dd learns images (and their step sizes), not both"},
		{"learn cross", func(c *Config) { c.Source = "emnist"; c.Learn = LearnImages },
			"source: emnist-letters: learnt images (learn images, method ld) use no base images, so there is no cross-dataset distillation (leave source unset or learn labels)"},
		{"learn unbalanced", func(c *Config) { c.Learn = LearnBoth; c.BaseSelection = SelectUnbalanced },
			"base_selection: learnt images take the classes of balanced base examples as their fixed labels: want balanced, got unbalanced"},
		{"dd field under ld", func(c *Config) { c.DDSteps = 5 }, "dd_steps: applies to method dd only (method is ld)"},
		{"dd backward", func(c *Config) { c.Method = MethodDD; c.DDBackward = "tape" }, `dd_backward: unknown value "tape" (want recompute or graph)`},
		{"dd layout", func(c *Config) { c.Method = MethodDD; c.BaseExamples = 50 },
			"base_examples: method dd trains each of its 10 steps (dd_steps) on as many images of each of the 10 classes of mnist: base_examples must be a multiple of 100, got 50"},
	}
	for _, tc := range cases {
		c := Default()
		tc.mod(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		found := false
		for _, l := range lines {
			if l == tc.want {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: got\n  %s\nwant the line\n  %s", tc.name, strings.Join(lines, "\n  "), tc.want)
		}
		if len(lines) != 1 {
			t.Errorf("%s: %d errors for one bad field: %q", tc.name, len(lines), lines)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(tc.want, fe.Field+": ") {
			t.Errorf("%s: error is not a *FieldError naming the field: %#v", tc.name, fe)
		}
		if _, rerr := c.Resolved(); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("%s: Resolved error %v differs from Validate's", tc.name, rerr)
		}
	}
}

func TestValidateAccepts(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"rr":                 func(c *Config) { c.Method = "rr" },
		"cuda:1":             func(c *Config) { c.Device = "cuda:1" },
		"cuda":               func(c *Config) { c.Device = "cuda" },
		"unbalanced within":  func(c *Config) { c.BaseSelection = "unbalanced"; c.BaseExamples = 25 },
		"cross 25":           func(c *Config) { c.Source = "emnist"; c.BaseExamples = 25 },
		"explicit same src":  func(c *Config) { c.Source = "mnist" },
		"cifar resnet eval":  func(c *Config) { c.Dataset = "cifar10"; c.EvalArch = "resnet" },
		"cifar lenet":        func(c *Config) { c.Dataset = "cifar10"; c.Arch = "lenet" },
		"mnist convnet":      func(c *Config) { c.Arch = "convnet" },
		"cifar convnet":      func(c *Config) { c.Dataset = "cifar10"; c.Arch = "convnet" },
		"convnet eval":       func(c *Config) { c.EvalArch = "convnet" },
		"target subset":      func(c *Config) { c.TargetSetSize = 100 },
		"no smoothing":       func(c *Config) { c.LabelSmoothing = 0 },
		"N=1 unbalanced":     func(c *Config) { c.BaseExamples = 1; c.BaseSelection = "unbalanced" },
		"k49 from emnist":    func(c *Config) { c.Dataset = "k49"; c.Source = "emnist" },
		"teacher only cross": func(c *Config) { c.Source = "kmnist"; c.Baselines = []string{"teacher"} },
	} {
		c := Default()
		mod(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateUnknownDatasetDoesNotCascade(t *testing.T) {
	c := Default()
	c.Dataset = "nope"
	err := c.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("want exactly one error, got %v", err)
	}
}

// TestConfigFieldsDocumented checks that every field has a snake_case json tag and a
// one-line doc comment naming its role (its description is its Setting: TestSettings).
func TestConfigFieldsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var fields int
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			fields++
			name := fld.Names[0].Name
			tag := reflect.StructTag(strings.Trim(fld.Tag.Value, "`")).Get("json")
			if !snake.MatchString(tag) {
				t.Errorf("%s: json tag %q is not snake_case", name, tag)
			}
			doc := strings.ToLower(fld.Doc.Text())
			if !strings.HasPrefix(doc, strings.ToLower(name)+":") {
				t.Errorf("%s: doc comment should start with %q", name, name+":")
			}
			if n := len(fld.Doc.List); n != 1 {
				t.Errorf("%s: doc comment of %d lines; the description belongs in settings.go", name, n)
			}
		}
		return false
	})
	if fields != reflect.TypeOf(Config{}).NumField() || fields < 40 {
		t.Fatalf("parsed %d fields", fields)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigFile(t *testing.T) {
	p := writeFile(t, `{
  "method": "rr",
  "dataset": "cifar10",
  "base_examples": 20,
  "label_betas": [0.8, 0.99],
  "baselines": ["smooth"],
  "seed": 7
}`)
	c, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Method, want.Dataset, want.BaseExamples, want.Seed = "rr", "cifar10", 20, 7
	want.LabelBetas = [2]float64{0.8, 0.99}
	want.Baselines = []string{"smooth"}
	if d := DiffDetails(c, want); len(d) != 0 {
		t.Fatalf("loaded config differs:\n%s", strings.Join(d, "\n"))
	}

	for name, tc := range map[string]struct{ content, want string }{
		"unknown":   {`{"epochs": 5, "learning_rate": 0.1}`, `unknown key "learning_rate"`},
		"case":      {`{"Base_Examples": 5}`, `unknown key "Base_Examples" (did you mean "base_examples"?)`},
		"dash":      {`{"base-examples": 5}`, `unknown key "base-examples" (did you mean "base_examples"?)`},
		"duplicate": {`{"epochs": 5, "epochs": 6}`, `key "epochs" appears twice`},
		"type":      {`{"base_examples": "100"}`, `line 1, column 19: key "base_examples": want an integer, got a string`},
		"type list": {"{\n  \"seed\": 1,\n  \"baselines\":   {\"true\": 1}\n}", `line 3, column 18: key "baselines": want a list of strings, got an object`},
		"syntax":    {"{\n  \"epochs\": 5,\n  \"seed\": ,\n}", "line 3, column"},
		"trailing":  {`{"epochs": 5} {}`, "text after the JSON object"},
		"array":     {`[1, 2]`, "expected a JSON object"},
		"empty":     {``, "the file is empty"},
		// Files that hold settings inside: a run's report.json, phases.json, a sweep grid.
		"report": {`{"schema_version": 2, "method": "ld", "config": {"epochs": 5}}`, `holds settings under its key "config", as a run's report.json`},
		"phases": {`{"format": "ldtorch phases 1", "config": {"epochs": 5}}`, `give that object alone in a file of its own`},
		"grid":   {`{"name": "t", "config": {"dataset": "mnist"}, "rows": []}`, `ldtorch sweep --grid) (unknown key "name")`},
	} {
		p := writeFile(t, tc.content)
		_, err := ReadFile(p)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q should start with the path and contain %q", name, err, tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil ||
		!strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	// An endless stream given as the file ends at the bound, naming the file.
	if _, err := ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero") ||
		!strings.Contains(err.Error(), "16 MiB limit for config files") {
		t.Errorf("/dev/zero: %v", err)
	}
}

func TestMarshalIndentRoundTrip(t *testing.T) {
	c := Default()
	c.Dataset, c.Source, c.Method = "k49", "emnist", "rr"
	r, err := c.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n  \"base_examples\": 100,\n") || b[len(b)-1] != '\n' {
		t.Fatalf("unexpected format:\n%s", b)
	}
	back, err := ReadFile(writeFile(t, string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffDetails(r, back); len(d) != 0 {
		t.Fatalf("round trip changed:\n%s", strings.Join(d, "\n"))
	}
	// Every field is written, so a written config never depends on future defaults.
	for _, k := range configKeys() {
		if !strings.Contains(string(b), `"`+k+`":`) {
			t.Errorf("key %q missing from MarshalIndent output", k)
		}
	}
}

func TestDiff(t *testing.T) {
	a, _ := Default().Resolved()
	b := a
	b.Baselines = append([]string(nil), a.Baselines...)
	if d := Diff(a, b); len(d) != 0 {
		t.Fatalf("equal configs differ: %v", d)
	}
	b.Epochs = 800
	b.Device = "cuda"
	b.LabelBetas[1] = 0.99
	b.Baselines = b.Baselines[:1]
	b.Out = "elsewhere"
	if got, want := Diff(a, b), []string{"label_betas", "epochs", "baselines", "device", "out"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff = %v, want %v", got, want)
	}
	// More epochs extend the run; fewer would change what was already trained.
	if got, want := ResumeConflicts(a, b), []string{"label_betas", "baselines"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ResumeConflicts = %v, want %v", got, want)
	}
	fewer := b
	fewer.Epochs = 200
	if got, want := ResumeConflicts(a, fewer), []string{"label_betas", "epochs", "baselines"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ResumeConflicts with fewer epochs = %v, want %v", got, want)
	}
	details := DiffDetails(a, b)
	if details[1] != "epochs: 400 -> 800" || details[0] != "label_betas: [0.9,0.999] -> [0.9,0.99]" {
		t.Fatalf("DiffDetails = %q", details)
	}
	// null (auto) and [] (none) are different settings.
	a.Baselines, b = nil, a
	b.Baselines = []string{}
	if got := Diff(a, b); !reflect.DeepEqual(got, []string{"baselines"}) {
		t.Fatalf("nil vs empty: %v", got)
	}
}

func TestAutoHelpers(t *testing.T) {
	// The paper's N_i (§7) and the interpolation between them.
	for n, want := range map[int]int{1: 1, 5: 5, 10: 10, 11: 10, 20: 10, 21: 10, 22: 11, 50: 25, 98: 49, 99: 49, 100: 50, 1000: 50, 0: 0} {
		if got := AutoInnerBatch("mnist", n); got != want {
			t.Errorf("AutoInnerBatch(mnist, %d) = %d, want %d", n, got, want)
		}
	}
	prev := 0
	for n := 1; n <= 1000; n++ {
		v := AutoInnerBatch("cifar10", n)
		if v < prev || v > n || v < 1 {
			t.Fatalf("AutoInnerBatch(cifar10, %d) = %d (previous %d): not monotone within [1, N]", n, v, prev)
		}
		prev = v
	}
	if AutoInnerBatch("cifar100", 50) != 50 || AutoInnerBatch("cifar100", 1000) != 100 {
		t.Error("cifar100 inner batch")
	}
	if AutoEpochs("emnist", 100) != 400 || AutoEpochs("k49", 101) != 200 || AutoEpochs("cifar100", 10) != 800 {
		t.Error("AutoEpochs")
	}
	if AutoResetWindow("k49", 1000) != 100 || AutoResetWindow("cifar10", 101) != 200 || AutoResetWindow("cifar10", 100) != 50 {
		t.Error("AutoResetWindow")
	}
}

// TestLearnDefaults: learn is labels unless the method is dd, whose settings are filled only
// under dd (0.02 for greyscale step sizes, 0.001 for colour).
func TestLearnDefaults(t *testing.T) {
	r, err := Default().Resolved()
	if err != nil || r.Learn != LearnLabels || r.DDSteps != 0 || r.LearnsImages() {
		t.Fatalf("default: learn %q, dd_steps %d, learns images %v (%v)", r.Learn, r.DDSteps, r.LearnsImages(), err)
	}
	for _, ds := range []struct {
		name string
		init float64
	}{{"mnist", 0.02}, {"cifar10", 0.001}} {
		c := Default()
		c.Method, c.Dataset = MethodDD, ds.name
		r, err := c.Resolved()
		if err != nil {
			t.Fatal(err)
		}
		if r.Learn != LearnImages || r.DDSteps != 10 || r.DDEpochs != 3 || r.DDStepLRInit != ds.init || r.DDLR != 0.01 ||
			r.DDBackward != DDRecompute || r.DDUnrolledSteps() != 30 || !r.LearnsImages() {
			t.Errorf("%s dd: %+v", ds.name, r)
		}
	}
	// A checkpoint written before learn existed resumes under learn labels.
	old, now := Default(), Default()
	old.Learn, now.Learn = "", LearnLabels
	if c := ResumeConflicts(old, now); len(c) != 0 {
		t.Errorf("learn \"\" -> labels conflicts: %v", c)
	}
}
