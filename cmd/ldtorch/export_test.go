package main

// export_test.go: `ldtorch export DIR` on artifacts with and without distilled.pt and on
// folders that are not artifacts.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// smallArtifact writes a 20-image MNIST artifact with true labels into a new folder.
func smallArtifact(t *testing.T) string {
	t.Helper()
	const n = 20
	cfg := config.Default()
	cfg.BaseExamples, cfg.BaseSelection = n, config.SelectUnbalanced
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 5, MetaSteps: 5}, Classes: 10, BaseShape: [4]int64{n, 1, 28, 28},
		BaseImages: make([]float32, n*28*28), BaseIndices: make([]int64, n), Labels: make([]float32, n*10)}
	for i := range res.BaseImages {
		res.BaseImages[i] = float32(i%13) / 13
	}
	for i := range n {
		res.BaseIndices[i] = int64(i)
		res.Labels[i*10+i%10] = 1
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := artifact.Write(dir, res); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExportCommand(t *testing.T) {
	dir := smallArtifact(t)
	pt := filepath.Join(dir, artifact.TorchFile)
	r := ldtorch(t, nil, "export", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("export of a new artifact: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An artifact from before distilled.pt: no file, a report that does not name it.
	var rep map[string]any
	js, _ := os.ReadFile(filepath.Join(dir, artifact.ReportFile))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	delete(rep["distilled"].(map[string]any), "pt_sha256")
	js, _ = json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, artifact.ReportFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(pt)
	r = ldtorch(t, nil, "export", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "wrote "+pt) {
		t.Fatalf("export of an older artifact: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if a, err := artifact.Read(dir); err != nil || !a.HasTorchFile {
		t.Fatalf("after export: %v", err)
	}
	// Folders that are not artifacts are refused, saying why.
	empty := t.TempDir()
	notDir := filepath.Join(empty, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	damaged := t.TempDir()
	os.WriteFile(filepath.Join(damaged, artifact.DistilledFile), []byte("not a zip"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export"}, exitUsage, "want one output folder"},
		{[]string{"export", empty}, exitUsage, "holds no distilled.npz"},
		{[]string{"export", notDir}, exitUsage, "is not a folder"},
		{[]string{"export", damaged}, exitFailure, "is not a valid ldtorch artifact"},
	} {
		r := ldtorch(t, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(damaged, artifact.TorchFile)); err == nil {
		t.Error("export wrote distilled.pt beside a damaged distilled.npz")
	}
}
