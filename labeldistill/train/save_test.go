package train

// save_test.go: trained models out. The Trained hook leaves the results as they are; a
// saved state dict has unique names covering every parameter and buffer; a folder of saved
// models is not mixed with new ones; and, where python3 has torch, every architecture's
// saved models (LD and RR) load strictly into docs/ARTIFACT.md's PyTorch modules, with the
// same names in the same order and the same shapes, and compute the logits ldtorch computes.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

type saveCase struct {
	arch    string
	c, size int64
	rr      bool
	entries int  // tensors in a state dict: parameters, buffers, num_batches_tracked, RR head
	grouped bool // trained in nets.BodyGrouped (a GPU's mode) instead of BodyPerModel
}

func (c saveCase) String() string {
	return fmt.Sprintf("%s-%dx%d-rr%v-grouped%v", c.arch, c.c, c.size, c.rr, c.grouped)
}

func saveCases() []saveCase {
	var cases []saveCase
	for _, rr := range []bool{false, true} {
		cases = append(cases,
			saveCase{"lenet", 1, 28, rr, 10, false},
			saveCase{"alexnet", 3, 32, rr, 10, false},
			saveCase{"resnet", 3, 32, rr, 92, false}, // 47 parameters, 15 BatchNorms × 3 buffers
			saveCase{"convnet", 1, 28, rr, 14, false})
	}
	// the other input shapes (padding, feature width) once; models trained grouped (their
	// parameters, BatchNorm statistics and RR heads are still each model's own)
	return append(cases, saveCase{"lenet", 3, 32, false, 10, false}, saveCase{"convnet", 3, 32, true, 14, false},
		saveCase{"resnet", 3, 32, false, 92, true}, saveCase{"lenet", 1, 28, true, 10, true})
}

// trainSmall trains 2 models of c for 3 steps on 6 random images of 3 classes and returns
// their accuracies on 8 random probe images. With dir set it saves them there (ModelSaver)
// with probe.pt: the probe images (x) and each model's logits on them (logits_K).
func trainSmall(t *testing.T, c saveCase, dir string) []float64 {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	const classes = 3
	net, err := nets.New(c.arch, c.c, c.size, c.size, classes)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Default().Resolved()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// images of std 10: large enough activations that every layer matters (AlexCifarNet's
	// LRN, with α = 0.001/9, barely changes small ones)
	randn := func(scale float64, shape ...int64) *torch.Tensor { return randnOn(t, rng, torch.CPU, scale, shape...) }
	images := randn(10, 6, c.c, c.size, c.size)
	labels := must(t)(torch.Softmax(randn(1, 6, classes), 1))
	probe := randn(10, 8, c.c, c.size, c.size)
	probeY := must(t)(torch.FromInt64([]int64{0, 1, 2, 0, 1, 2, 0, 1}, 8))
	tr := &Trainer{Net: net, RR: c.rr, Cfg: cfg, Images: images, Labels: labels, Batch: 4, Opt: AdamSpec(1e-3), Device: torch.CPU, Together: 1}
	mode := nets.BodyPerModel
	if c.grouped {
		mode, tr.Together = nets.BodyGrouped, 2
	}
	var saver *ModelSaver
	var names []string
	var logits []*torch.Tensor
	if dir != "" {
		if saver, err = NewModelSaver(dir); err != nil {
			t.Fatal(err)
		}
		tr.Trained = func(first int, l *Models) error {
			if err := saver.Save(first, l); err != nil {
				return err
			}
			// the logits inside the hook: the models are freed after it
			return torch.NoGrad(func() error {
				out, err := l.LogitsEach(probe)
				for i, o := range out {
					names, logits = append(names, fmt.Sprintf("logits_%d", first+i)), append(logits, o)
				}
				return err
			})
		}
	}
	accs, err := tr.TestRange(context.Background(), 3, 0, 2, 7, "save-test", probe, probeY, mode)
	if err != nil {
		t.Fatal(err)
	}
	if saver == nil {
		return accs
	}
	if err := torch.SavePickle(filepath.Join(dir, "probe.pt"), append(names, "x"), append(logits, probe)); err != nil {
		t.Fatal(err)
	}
	if err := saver.WriteManifest(net, c.rr, 3, accs); err != nil {
		t.Fatal(err)
	}
	// a state dict names every tensor once
	l, err := NewModels(net, c.rr, cfg, AdamSpec(1e-3), []uint64{1}, torch.CPU, torch.Float, nets.BodyPerModel)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sd, ts, err := l.StateDict(0)
	if err != nil {
		t.Fatal(err)
	}
	unique := slices.Compact(slices.Sorted(slices.Values(sd)))
	if len(unique) != len(sd) || len(ts) != len(sd) || len(sd) != c.entries {
		t.Fatalf("%v: state dict of %d names (%d unique), %d tensors, want %d: %v", c, len(sd), len(unique), len(ts), c.entries, sd)
	}
	return accs
}

func must(t *testing.T) func(*torch.Tensor, error) *torch.Tensor {
	return func(x *torch.Tensor, err error) *torch.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

// Saving the models changes none of the results, and a folder of saved models is not
// written into again.
func TestSaveModelsKeepsResults(t *testing.T) {
	torch.SetNumThreads(1)
	for _, c := range []saveCase{{"lenet", 1, 28, false, 10, false}, {"resnet", 3, 32, true, 92, false}} {
		dir := t.TempDir()
		plain, saved := trainSmall(t, c, ""), trainSmall(t, c, dir)
		if !slices.Equal(plain, saved) {
			t.Fatalf("%v: accuracies %v without saving, %v with", c, plain, saved)
		}
		for _, f := range []string{ModelFile(0), ModelFile(1), ManifestFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		var m SavedModels
		js, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil || json.Unmarshal(js, &m) != nil {
			t.Fatalf("models.json: %v\n%s", err, js)
		}
		if m.Arch != c.arch || m.RR != c.rr || len(m.Models) != 2 || m.Models[1].File != "model-1.pt" || *m.Models[1].TestAccuracy != saved[1] {
			t.Fatalf("models.json: %s", js)
		}
		if _, err := NewModelSaver(dir); err == nil || !strings.Contains(err.Error(), "already holds saved models") {
			t.Fatalf("a folder of saved models accepted again: %v", err)
		}
	}
	if _, err := NewModelSaver(filepath.Join("/proc", "no-such-folder")); err == nil {
		t.Fatal("an unwritable folder accepted")
	}
}

// pythonTorch returns a python3 that imports torch and numpy, or skips the test.
func pythonTorch(t *testing.T) string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import torch, numpy; torch.zeros(1)").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with torch and numpy (scripts/setup.sh --bench installs Debian's python3-torch)")
	return ""
}

// pytorchModules is the Python code of docs/ARTIFACT.md's module definitions.
func pytorchModules(t *testing.T, docs string) string {
	doc, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- pytorch-modules: begin -->\n```python\n")
	code, _, ok2 := strings.Cut(rest, "```\n<!-- pytorch-modules: end -->")
	if !ok1 || !ok2 {
		t.Fatalf("%s: pytorch-modules markers not found", docs)
	}
	return code
}

// checkModels is the Python check: for each folder, every saved model loads strictly into
// load_model's module, whose state_dict() has the file's names in its order and shapes,
// and its logits on probe.pt's x agree with ldtorch's.
const checkModels = `
import json, sys
for folder in sys.argv[1:]:
    probe = torch.load(f"{folder}/probe.pt")
    for k in range(2):
        sd = torch.load(f"{folder}/model-{k}.pt")
        model = load_model(folder, k)
        mine = model.state_dict()
        assert list(sd) == list(mine), (folder, list(sd), list(mine))
        for n in sd:
            assert sd[n].shape == mine[n].shape and sd[n].dtype == mine[n].dtype, (folder, n, sd[n].shape, mine[n].shape)
        with torch.no_grad():
            got, want = model(probe["x"]), probe[f"logits_{k}"]
        err = ((got - want).abs().max() / (1 + want.abs().max())).item()
        assert err < 1e-5, (folder, k, err, got, want)  # 0 with the same libtorch
    print(folder, "ok", type(model).__name__)
`

func TestSavedModelsLoadIntoDocumentedModules(t *testing.T) {
	py := pythonTorch(t)
	torch.SetNumThreads(1)
	root := t.TempDir()
	args := []string{"-c", pytorchModules(t, filepath.Join("..", "..", "docs", "ARTIFACT.md")) + checkModels}
	for _, c := range saveCases() {
		dir := filepath.Join(root, c.String())
		trainSmall(t, c, dir)
		args = append(args, dir)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(string(out), " ok "); n != len(saveCases()) {
		t.Fatalf("%d of %d folders checked:\n%s", n, len(saveCases()), out)
	}
	t.Logf("%s", out)
}
