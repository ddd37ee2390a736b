package main

// round4_test.go: the rules every command keeps on select-base, the base-index files it
// writes, evaluate --protocol ddranking and report's view of it: bounded counts, damaged
// progress and cache files never taken for good ones, one selection into a file at a
// time, an evaluation shown only beside the artifact it evaluated.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/selectbase"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
)

// TestSelectBaseCounts: counts that would train for days or allocate past memory (10⁹
// candidates crashed the Go runtime; 10⁸ repeats were killed by the kernel's OOM killer)
// are usage errors naming the flag, before any data is read; the library keeps the same
// bounds.
func TestSelectBaseCounts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sel.txt")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--strategy", "paper", "--candidates", "1000000000"}, "--candidates"},
		{[]string{"--strategy", "paper", "--repeats", "99999999"}, "--repeats"},
		{[]string{"--strategy", "paper", "--max-steps", "2000000000"}, "--max-steps"},
		{[]string{"--strategy", "paper", "--max-steps", "-5"}, "--max-steps"},
		{[]string{"--strategy", "herding", "--feature-epochs", "2000000000"}, "--feature-epochs"},
	} {
		start := time.Now()
		r := hostileRun(t, time.Minute, append([]string{"select-base", "--dataset", "mnist", "--base", "10", "--out", out}, c.args...)...)
		wantOneLine(t, r, exitUsage, c.flag, "must be between 1 and")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: took %v", c.args, d)
		}
	}
	noFile(t, out)
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples = "mnist", 10
	for _, o := range []selectbase.Options{
		{Strategy: selectbase.Paper, Candidates: config.MaxSelectCandidates + 1},
		{Strategy: selectbase.Paper, Repeats: config.MaxEvalModels + 1},
		{Strategy: selectbase.Herding, FeatureEpochs: config.MaxEvalEpochs + 1},
	} {
		if _, err := selectbase.Plan(cfg, o, nil); err == nil || !strings.Contains(err.Error(), "must be between 1 and") {
			t.Errorf("Plan(%+v): %v", o, err)
		}
	}
	cfg.BaselineMaxSteps = config.MaxTrainSteps + 1
	if _, err := selectbase.Plan(cfg, selectbase.Options{Strategy: selectbase.Paper}, nil); err == nil || !strings.Contains(err.Error(), "baseline_max_steps") {
		t.Errorf("Plan with baseline_max_steps %d: %v", cfg.BaselineMaxSteps, err)
	}
}

// TestSelectBaseDamagedProgress: a progress file whose scores were edited past 100 %
// (1e308 % would always win) is trained again with a warning naming it, and the selection
// is the one of a clean run.
func TestSelectBaseDamagedProgress(t *testing.T) {
	shared := sharedDatasets(t)
	dir := t.TempDir()
	args := func(out string) []string {
		return []string{"select-base", "--data-dir", shared, "--dataset", "mnist", "--base", "10", "--strategy", "paper",
			"--candidates", "3", "--repeats", "1", "--max-steps", "50", "--validation-size", "500", "--threads", "1", "--out", out}
	}
	clean := filepath.Join(dir, "clean.txt")
	if r := ldtorch(t, nil, args(clean)...); r.code != 0 {
		t.Fatalf("select-base: exit %d\n%s", r.code, r.stderr)
	}
	sel, err := selectbase.ReadSelection(clean)
	if err != nil {
		t.Fatal(err)
	}
	// The progress a run of the same settings left after its first candidate, edited.
	out := filepath.Join(dir, "edited.txt")
	cand := sel.Paper.Candidates[0]
	cand.Accuracies = [][]float64{slices.Clone(cand.Accuracies[0])}
	cand.Accuracies[0][0] = 1e308
	b, err := json.Marshal(struct {
		Fingerprint string `json:"fingerprint"`
		selectbase.Candidate
	}{sel.Fingerprint, cand})
	if err != nil {
		t.Fatal(err)
	}
	progress := out + ".progress"
	if err := os.MkdirAll(progress, 0o755); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(progress, "candidate-00000.json")
	if err := os.WriteFile(edited, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := ldtorch(t, nil, args(out)...)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: "+edited+" has an accuracy of 1e+308 %, outside 0 to 100") {
		t.Fatalf("select-base with an edited progress file: exit %d\n%s", r.code, r.stderr)
	}
	again, err := selectbase.ReadSelection(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Indices, sel.Indices) || again.Paper.Chosen != sel.Paper.Chosen ||
		!reflect.DeepEqual(again.Paper.Candidates[0].Accuracies, sel.Paper.Candidates[0].Accuracies) {
		t.Errorf("the edited progress changed the selection: candidate %d %v, clean run candidate %d %v",
			again.Paper.Chosen, again.Indices, sel.Paper.Chosen, sel.Indices)
	}
}

// TestSelectBaseOneWriter: a selection into FILE holds FILE.progress's lock whatever its
// strategy; a second one, with --overwrite too, is refused naming the folder and leaves
// the first one's finished candidates alone (it used to remove them, then run beside it).
// A selection that keeps no progress leaves no FILE.progress.
func TestSelectBaseOneWriter(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "sel.txt")
	progress := out + ".progress"
	if err := os.MkdirAll(progress, 0o755); err != nil {
		t.Fatal(err)
	}
	done := filepath.Join(progress, "candidate-00000.json")
	if err := os.WriteFile(done, []byte(`{"fingerprint": "of the running selection"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock, err := atomicfile.LockDir(progress) // as the running selection holds it
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{
		{"--strategy", "paper", "--overwrite"},
		{"--strategy", "random", "--overwrite"},
		{"--strategy", "kmeans"},
	} {
		r := hostileRun(t, time.Minute, append([]string{"select-base", "--dataset", "mnist", "--base", "10", "--threads", "1", "--out", out}, extra...)...)
		wantOneLine(t, r, exitUsage, "--out", progress, "in use by another run")
		if _, err := os.Stat(done); err != nil {
			t.Fatalf("%v: the running selection's candidate is gone: %v", extra, err)
		}
	}
	unlock()
	noFile(t, out)

	shared := sharedDatasets(t)
	other := filepath.Join(dir, "random.txt")
	if r := ldtorch(t, nil, "select-base", "--data-dir", shared, "--dataset", "mnist", "--base", "10", "--strategy", "random",
		"--validation-size", "500", "--threads", "1", "--quiet", "--out", other); r.code != 0 {
		t.Fatalf("select-base random: exit %d\n%s", r.code, r.stderr)
	}
	noFile(t, other+".progress")
}

// TestBaseFileHeaderAndGrid: an index file whose select-base header names another count
// than it lists is refused naming the file; a grid's damaged base_file is named without
// the hint to make it (which is for a missing one).
func TestBaseFileHeaderAndGrid(t *testing.T) {
	dir := t.TempDir()
	idx := []int64{1, 3, 5, 7, 2, 0, 13, 15, 17, 4}
	text, err := data.FormatBaseFile(data.BaseFileHeader{Strategy: "random", Dataset: "mnist", BaseExamples: 20,
		BaseSeed: 1234, ValidationSize: 10000}, nil, idx, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "edited.txt")
	if err := os.WriteFile(edited, text, 0o644); err != nil {
		t.Fatal(err)
	}
	r := hostileRun(t, time.Minute, "distill", "--dataset", "mnist", "--base", "10", "--base-indices", edited, "--dry-run")
	wantOneLine(t, r, exitUsage, "--base-indices", edited, "header says 20 base examples, the file lists 10")

	shared := sharedDatasets(t)
	damaged := filepath.Join(dir, "damaged.txt")
	if err := os.WriteFile(damaged, text[:strings.IndexByte(string(text), '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, want string
		hint       bool
	}{{damaged, "no indices", false}, {filepath.Join(dir, "missing.txt"), "no such file", true}} {
		grid := tinyGrid(t, dir, func(g map[string]any) { g["base_file"] = c.file })
		r := hostileRun(t, time.Minute, "sweep", "--data-dir", shared, "--grid", grid, "--out", filepath.Join(dir, "sweep"), "--quiet")
		wantOneLine(t, r, -1, "base_file", c.file, c.want)
		if strings.Contains(r.stderr, "make it with") != c.hint {
			t.Errorf("%s: the hint to make it: %q", c.file, r.stderr)
		}
	}
}

// TestDDRankingHostileFiles: the full-data cache's parameters replaced by an endless device
// and its entry by a named pipe are a missing entry (trained again and replaced), not an
// out-of-memory crash or a hang; report leaves out an evaluation of another distilled.npz
// with a note, and names a device put in place of one.
func TestDDRankingHostileFiles(t *testing.T) {
	shared := sharedDatasets(t)
	out := tinyRRArtifact(t, shared)
	cache := filepath.Join(t.TempDir(), "cache")
	eval := func() map[string]any {
		t.Helper()
		r := hostileRun(t, 2*time.Minute, "evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "lenet", "--epochs", "1",
			"--models", "1", "--cache-dir", cache, "--threads", "1", "--quiet", "--json")
		if r.code != 0 {
			t.Fatalf("evaluate --protocol ddranking: exit %d\n%s", r.code, r.stderr)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("--json: %v: %q", err, r.stdout)
		}
		return res
	}
	eval()
	npzs, _ := filepath.Glob(filepath.Join(cache, "*.npz"))
	if len(npzs) != 1 {
		t.Fatalf("cache: %v", npzs)
	}
	entry := strings.TrimSuffix(npzs[0], ".npz") + ".json"
	os.Remove(npzs[0])
	if err := os.Symlink("/dev/zero", npzs[0]); err != nil {
		t.Fatal(err)
	}
	if full := eval()["full_data"].(map[string]any); full["cached"] == true {
		t.Errorf("parameters from /dev/zero taken from the cache: %v", full)
	}
	if fi, err := os.Lstat(npzs[0]); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the cache's parameters were not replaced: %v %v", fi, err)
	}
	os.Remove(entry)
	if err := syscall.Mkfifo(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if full := eval()["full_data"].(map[string]any); full["cached"] == true {
		t.Errorf("an entry from a named pipe taken from the cache: %v", full)
	}

	// report: the evaluation of another artifact's distilled.npz, then a device.
	evalFile := filepath.Join(out, "evaluations", "ddranking.json")
	var res map[string]any
	if err := json.Unmarshal(mustReadFile(t, evalFile), &res); err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, out)
	own := rep["distilled"].(map[string]any)["sha256"].(string)
	if res["distilled_sha256"] != own {
		t.Fatalf("ddranking.json records distilled_sha256 %v, the artifact's is %s", res["distilled_sha256"], own)
	}
	res["distilled_sha256"] = strings.Repeat("ab", 32)
	b, _ := json.Marshal(res)
	if err := os.WriteFile(evalFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := hostileRun(t, time.Minute, "report", out)
	if r.code != 0 || !strings.Contains(r.stdout, "evaluations/ddranking.json evaluated another distilled.npz (sha256 abababababab, this artifact's "+own[:12]+"): not shown") {
		t.Errorf("report with another artifact's evaluation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if html := mustReadFile(t, filepath.Join(out, "report.html")); strings.Contains(string(html), "hlr") {
		t.Error("report.html shows another artifact's evaluation")
	}
	os.Remove(evalFile)
	if err := os.Symlink("/dev/zero", evalFile); err != nil {
		t.Fatal(err)
	}
	wantOneLine(t, hostileRun(t, time.Minute, "report", out), exitFailure, evalFile, "a device, not a regular file")
}
