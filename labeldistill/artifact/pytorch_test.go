package artifact

// pytorch_test.go: the artifact for PyTorch. distilled.pt is written with the artifact and
// named by its report, checked by Read (against the report, or against distilled.npz where
// the report does not name it), absent without harm, and written by Export for older
// artifacts; where python3 has torch and numpy, torch.load of distilled.pt equals numpy.load
// of distilled.npz member for member, and LeNets that Evaluate saved on real MNIST score in
// docs/ARTIFACT.md's PyTorch module what ldtorch reported.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

func TestTorchFileWrittenAndChecked(t *testing.T) {
	dir := t.TempDir()
	res := smallArtifactResult()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	pt := filepath.Join(dir, TorchFile)
	raw, err := os.ReadFile(pt)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if !a.HasTorchFile || a.Report.Distilled.TorchSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("distilled.pt present %v, report names %q, file %x", a.HasTorchFile, a.Report.Distilled.TorchSHA256, sum)
	}
	if _, wrote, err := Export(dir); err != nil || wrote {
		t.Fatalf("Export of a new artifact: wrote %v, %v", wrote, err)
	}

	// A damaged or foreign distilled.pt is refused, naming it.
	bad := append([]byte{}, raw...)
	bad[len(bad)/2] ^= 1
	writeTestFile(t, pt, bad)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), TorchFile) || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("damaged distilled.pt: %v", err)
	}
	// An absent one is no error; Export writes the same file again.
	os.Remove(pt)
	if a, err := Read(dir); err != nil || a.HasTorchFile {
		t.Fatalf("without distilled.pt: %v (present %v)", err, a != nil && a.HasTorchFile)
	}
	if _, wrote, err := Export(dir); err != nil || !wrote {
		t.Fatalf("Export: wrote %v, %v", wrote, err)
	}
	if again, err := os.ReadFile(pt); err != nil || string(again) != string(raw) {
		t.Fatalf("Export wrote another file than Write (%d bytes, %v)", len(again), err)
	}

	// An artifact from before distilled.pt: its report does not name it.
	var rep Report
	js, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	rep.Distilled.TorchSHA256 = ""
	js, _ = json.Marshal(&rep)
	writeTestFile(t, filepath.Join(dir, ReportFile), js)
	if strings.Contains(string(js), "pt_sha256") {
		t.Fatal("pt_sha256 is written when empty")
	}
	os.Remove(pt)
	if _, err := Read(dir); err != nil {
		t.Fatal(err)
	}
	if _, wrote, err := Export(dir); err != nil || !wrote {
		t.Fatalf("Export of an older artifact: wrote %v, %v", wrote, err)
	}
	if a, err := Read(dir); err != nil || !a.HasTorchFile {
		t.Fatalf("older artifact with exported distilled.pt: %v", err)
	}
	// … where a distilled.pt of other values is refused, member by member.
	if err := torch.WithScope(func(*torch.Scope) error {
		other := append([]float32{}, res.Labels...)
		other[0], other[1] = other[1], other[0]
		images, err := torch.FromFloat32(res.BaseImages, res.BaseShape[:]...)
		if err != nil {
			return err
		}
		labels, err := torch.FromFloat32(other, res.BaseShape[0], int64(res.Classes))
		if err != nil {
			return err
		}
		indices, err := torch.FromInt64(res.BaseIndices, int64(len(res.BaseIndices)))
		if err != nil {
			return err
		}
		return torch.SavePickle(pt, []string{"images", "labels", "base_indices"}, []*torch.Tensor{images, labels, indices})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "labels differs") {
		t.Fatalf("distilled.pt of other labels: %v", err)
	}
	// Export refuses a folder that is not an artifact.
	if _, _, err := Export(t.TempDir()); err == nil || !strings.Contains(err.Error(), DistilledFile) {
		t.Fatalf("Export of an empty folder: %v", err)
	}
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
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

func TestTorchFileEqualsNpzInPython(t *testing.T) {
	py := pythonTorch(t)
	dir := t.TempDir()
	if err := Write(dir, smallResult(t, config.MethodRR)); err != nil {
		t.Fatal(err)
	}
	const check = `
import sys, numpy as np, torch
d = sys.argv[1]
npz = np.load(f"{d}/distilled.npz")
for pt in (torch.load(f"{d}/distilled.pt"), torch.load(f"{d}/distilled.pt", weights_only=True)):
    assert type(pt) is dict and list(pt) == list(npz.files), (list(pt), npz.files)
    for name in npz.files:
        a, t = npz[name], pt[name]
        assert isinstance(t, torch.Tensor) and not t.requires_grad, name
        assert str(t.dtype) == "torch." + str(a.dtype) and tuple(t.shape) == a.shape, (name, t.dtype, a.dtype, t.shape, a.shape)
        assert np.array_equal(t.numpy(), a), name
print("equal:", " ".join(npz.files))
`
	out, err := exec.Command(py, "-c", check, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "equal: images labels base_indices base_classes") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// sharedMNIST is real MNIST from the shared datasets beside the repository, or a skip.
func sharedMNIST(t *testing.T) (trainSet, test *data.RawSet) {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets", "mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared MNIST not found at %s", dir)
	}
	opt := data.IDXOptions{Classes: 10, H: 28, W: 28}
	var err error
	if trainSet, err = data.ReadIDXPair(filepath.Join(dir, "train-images-idx3-ubyte.gz"), filepath.Join(dir, "train-labels-idx1-ubyte.gz"), opt); err != nil {
		t.Fatal(err)
	}
	if test, err = data.ReadIDXPair(filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), opt); err != nil {
		t.Fatal(err)
	}
	return trainSet, test
}

// normalised is examples first..first+n-1 of r as MNIST normalises them.
func normalised(r *data.RawSet, first, n int) *data.Split {
	size := r.ImageSize()
	s := &data.Split{Images: make([]float32, n*size), Labels: make([]int64, n), N: n, C: 1, H: 28, W: 28, Classes: 10}
	for i := range n {
		for p := range size {
			s.Images[i*size+p] = float32((float64(r.Pixels[(first+i)*size+p])/255 - 0.1307) / 0.3081)
		}
		s.Labels[i] = r.Labels[first+i]
	}
	return s
}

// LeNets trained by Evaluate on 100 real MNIST images with their true labels (LD and RR
// heads), saved with SaveModels, score the same accuracy on 1000 MNIST test images in
// docs/ARTIFACT.md's PyTorch LeNet as ldtorch reported.
func TestSavedLeNetScoresInPyTorch(t *testing.T) {
	py := pythonTorch(t)
	trainSet, testSet := sharedMNIST(t)
	torch.SetNumThreads(1)
	const n = 100
	base := normalised(trainSet, 0, n)
	test := normalised(testSet, 0, 1000)
	cfg := config.Default()
	cfg.BaseExamples, cfg.BaseSelection = n, config.SelectUnbalanced
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 100, MetaSteps: 100}, Classes: 10, BaseShape: [4]int64{n, 1, 28, 28},
		BaseImages: base.Images, BaseClasses: base.Labels, Labels: make([]float32, n*10)}
	for i, c := range base.Labels {
		res.Labels[i*10+int(c)] = 1
	}
	art := t.TempDir()
	if err := Write(art, res); err != nil {
		t.Fatal(err)
	}
	a, err := Read(art)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(t.TempDir(), "test.pt")
	if err := torch.WithScope(func(*torch.Scope) error {
		x, err := torch.FromFloat32(test.Images, int64(test.N), 1, 28, 28)
		if err != nil {
			return err
		}
		y, err := torch.FromInt64(test.Labels, int64(test.N))
		if err != nil {
			return err
		}
		return torch.SavePickle(testFile, []string{"x", "y"}, []*torch.Tensor{x, y})
	}); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ARTIFACT.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- pytorch-modules: begin -->\n```python\n")
	modules, _, ok2 := strings.Cut(rest, "```\n<!-- pytorch-modules: end -->")
	if !ok1 || !ok2 {
		t.Fatal("docs/ARTIFACT.md: pytorch-modules markers not found")
	}
	const score = `
import sys
test = torch.load(sys.argv[1])
for folder in sys.argv[2:]:
    info = json.load(open(f"{folder}/models.json"))
    for k, m in enumerate(info["models"]):
        with torch.no_grad():
            pred = load_model(folder, k)(test["x"]).argmax(1)
        print(info["rr"], k, 100 * (pred == test["y"]).double().mean().item(), m["test_accuracy"])
`
	args := []string{"-c", "import json\n" + modules + score, testFile}
	reported := map[string][]float64{}
	for _, rr := range []bool{false, true} {
		models := filepath.Join(t.TempDir(), "models")
		ev, err := Evaluate(context.Background(), a, test, EvalConfig{Models: 2, Steps: 100, RR: &rr, SaveModels: models})
		if err != nil {
			t.Fatal(err)
		}
		reported[map[bool]string{false: "False", true: "True"}[rr]] = ev.Accuracies
		args = append(args, models)
		if _, err := Evaluate(context.Background(), a, test, EvalConfig{Models: 1, Steps: 1, SaveModels: models}); err == nil ||
			!strings.Contains(err.Error(), "already holds saved models") {
			t.Fatalf("a folder of saved models written into again: %v", err)
		}
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 models scored:\n%s", out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("%q", line)
		}
		k, err0 := strconv.Atoi(f[1])
		pyAcc, err1 := strconv.ParseFloat(f[2], 64)
		listed, err2 := strconv.ParseFloat(f[3], 64)
		if err0 != nil || err1 != nil || err2 != nil || k > 1 || reported[f[0]] == nil {
			t.Fatalf("%q", line)
		}
		want := reported[f[0]][k]
		if listed != want || pyAcc < want-0.1 || pyAcc > want+0.1 || pyAcc < 50 {
			t.Fatalf("rr %s model %d: PyTorch scores %.2f %%, ldtorch reported %.2f %% (models.json: %.2f)", f[0], k, pyAcc, want, listed)
		}
		t.Logf("rr %s model %d: PyTorch %.2f %%, ldtorch %.2f %%", f[0], k, pyAcc, want)
	}
}
