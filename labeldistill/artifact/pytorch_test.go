package artifact

// pytorch_test.go: the artifact for PyTorch. distilled.pt is written with the artifact and
// named by its report, checked by Read (against the report, or against distilled.npz where
// the report does not name it), absent without harm, and written by Export for older
// artifacts; where python3 has torch and numpy, torch.load of distilled.pt equals numpy.load
// of distilled.npz member for member.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
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
