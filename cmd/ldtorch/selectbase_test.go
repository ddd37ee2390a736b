// Tests of `ldtorch select-base`: bad input is a usage error naming the flag; a paper
// selection killed with SIGKILL and run again ends with the selection of an uninterrupted
// run; a distillation on selected examples records them in report.json and `report` says so.

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/selectbase"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func TestSelectBaseBadInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sel.txt")
	base := []string{"select-base", "--dataset", "mnist", "--out", out, "--threads", "1"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--base", "10", "--strategy", "coreset"}, "--strategy"},
		{[]string{"--base", "10", "--strategy", "paper", "--candidates", "0"}, "--candidates"},
		{[]string{"--base", "10", "--strategy", "paper", "--repeats", "-1"}, "--repeats"},
		{[]string{"--base", "0", "--strategy", "random"}, "--base"},
		{[]string{"--base", "10", "--strategy", "kmeans", "--nproc", "2"}, "--nproc"},
		// Settings of other strategies are refused, not ignored.
		{[]string{"--base", "10", "--strategy", "kmeans", "--repeats", "2"}, "--repeats: the kmeans strategy does not use it"},
		{[]string{"--base", "10", "--strategy", "random", "--arch", "lenet"}, "--arch: the random strategy"},
		{[]string{"--base", "10", "--strategy", "herding", "--candidates", "5"}, "--candidates: the herding strategy"},
		{[]string{"--base", "10", "--strategy", "kcenter", "--max-steps", "100"}, "--max-steps: the kcenter strategy"},
		{[]string{"--base", "10", "--strategy", "paper", "--feature-epochs", "2"}, "--feature-epochs: the paper strategy"},
	} {
		r := ldtorch(t, nil, append(slices.Clone(base), c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.flag) {
			t.Errorf("%v: exit %d: %s", c.args, r.code, r.stderr)
		}
	}
	r := ldtorch(t, nil, "select-base", "--dataset", "mnist", "--base", "10", "--strategy", "random", "--out", filepath.Join(t.TempDir(), "x.npy"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "--out") {
		t.Errorf("--out x.npy: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a failed selection wrote its file")
	}
	// With data: N not a multiple of the classes, and more per class than a class holds
	// (a target set of 1,000 images: about 100 per class).
	shared := sharedDatasets(t)
	for _, c := range [][]string{
		{"--base", "15"},
		{"--base", "1000", "--validation-size", "59000"},
	} {
		r := ldtorch(t, nil, append(slices.Clone(base), append([]string{"--strategy", "kmeans", "--data-dir", shared}, c...)...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--base:") {
			t.Errorf("%v: exit %d: %s", c, r.code, r.stderr)
		}
		t.Logf("%v: %s", c, strings.TrimSpace(r.stderr))
	}
}

// paperArgs is a quick paper selection of real MNIST (6 candidates × 2 trainings of 50 steps).
func paperArgs(shared, out string) []string {
	return []string{"select-base", "--data-dir", shared, "--dataset", "mnist", "--base", "10", "--strategy", "paper",
		"--candidates", "6", "--repeats", "2", "--max-steps", "50", "--validation-size", "1000", "--threads", "1", "--out", out}
}

func TestSelectBaseResumeAfterKill9(t *testing.T) {
	shared := sharedDatasets(t)
	whole, killed := filepath.Join(t.TempDir(), "sel.txt"), filepath.Join(t.TempDir(), "sel.txt")
	if r := ldtorch(t, nil, paperArgs(shared, whole)...); r.code != 0 {
		t.Fatalf("uninterrupted selection: exit %d\n%s", r.code, r.stderr)
	}
	cmd := binaryCommand(t, nil, paperArgs(shared, killed)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	progress := killed + ".progress"
	deadline := time.After(3 * time.Minute)
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("the selection ended (%v) before it could be killed\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no finished candidate after 3 minutes\n%s", stderr.String())
		case <-time.After(5 * time.Millisecond):
			if m, _ := filepath.Glob(filepath.Join(progress, "candidate-*.json")); len(m) > 0 {
				break wait
			}
		}
	}
	cmd.Process.Kill() // SIGKILL
	<-exited
	done, _ := filepath.Glob(filepath.Join(progress, "candidate-*.json"))
	if _, err := os.Stat(killed); err == nil || len(done) == 0 || len(done) == 6 {
		t.Fatalf("killed selection: wrote its file %v, %d candidates finished", err == nil, len(done))
	}
	r := ldtorch(t, nil, paperArgs(shared, killed)...)
	if r.code != 0 || !strings.Contains(r.stderr, "finished earlier") {
		t.Fatalf("continued selection: exit %d\n%s", r.code, r.stderr)
	}
	a, b := mustReadFile(t, whole), mustReadFile(t, killed)
	if !bytes.Equal(a, b) {
		t.Fatalf("killed after %d candidates and continued: the index file differs\n%s\n%s", len(done), a, b)
	}
	sa, err := selectbase.ReadSelection(whole)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := selectbase.ReadSelection(killed)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Paper == nil || !reflect.DeepEqual(sa.Paper, sb.Paper) {
		t.Fatal("the candidates' scores differ")
	}
	if _, err := os.Stat(progress); err == nil {
		t.Error("the progress folder is left after the selection was written")
	}
	t.Logf("killed after %d of 6 candidates; the continued selection is the uninterrupted one's", len(done))
	// Run again: nothing to do. Other settings into the same file: refused.
	if r := ldtorch(t, nil, paperArgs(shared, killed)...); r.code != 0 || !strings.Contains(r.stderr, "already holds") {
		t.Errorf("rerun of a finished selection: exit %d: %s", r.code, r.stderr)
	}
	if r := ldtorch(t, nil, append(paperArgs(shared, killed), "--repeats", "1")...); r.code != exitUsage || !strings.Contains(r.stderr, "--out") {
		t.Errorf("another selection into the same file: exit %d: %s", r.code, r.stderr)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// selDistill is a seconds-long LD RR run of 10 base examples.
func selDistill(shared, out string, extra ...string) []string {
	return append([]string{"distill", "--data-dir", shared, "--dataset", "mnist", "--method", "rr", "--base", "10",
		"--inner-batch", "10", "--outer-batch", "128", "--target-set-size", "500", "--validation-size", "1000",
		"--epochs", "1", "--eval-models", "1", "--baselines", "none", "--threads", "1", "--quiet", "--out", out}, extra...)
}

// jsonHas reports whether the JSON object b has key with value v.
func jsonHas(t *testing.T, b json.RawMessage, key string, v any) bool {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(m[key], v)
}

func readOrigin(t *testing.T, dir string) *labeldistill.BaseOrigin {
	t.Helper()
	var rep struct {
		Origin *labeldistill.BaseOrigin `json:"base_origin"`
	}
	if err := json.Unmarshal(mustReadFile(t, filepath.Join(dir, "report.json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Origin == nil {
		t.Fatalf("%s: report.json has no base_origin", dir)
	}
	return rep.Origin
}

func TestDistillRecordsSelection(t *testing.T) {
	shared := sharedDatasets(t)
	dir := t.TempDir()
	sel := filepath.Join(dir, "kmeans-10.txt")
	r := ldtorch(t, nil, "select-base", "--data-dir", shared, "--dataset", "mnist", "--base", "10", "--strategy", "kmeans",
		"--validation-size", "1000", "--threads", "1", "--out", sel)
	if r.code != 0 || !strings.Contains(r.stdout, "--base-indices "+sel) {
		t.Fatalf("select-base: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sum := sha256.Sum256(mustReadFile(t, sel))
	out := filepath.Join(dir, "run")
	if r := ldtorch(t, nil, selDistill(shared, out, "--base-indices", sel, "--checkpoint-every", "0")...); r.code != 0 {
		t.Fatalf("distill: exit %d\n%s", r.code, r.stderr)
	}
	o := readOrigin(t, out)
	if o.Selection != "given" || o.Strategy != "kmeans" || o.File != sel || o.FileSHA256 != hex.EncodeToString(sum[:]) ||
		!o.Balanced || !slices.Equal(o.ClassCounts, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) || !jsonHas(t, o.Settings, "space", "pixels") {
		t.Fatalf("base_origin %+v", o)
	}
	r = ldtorch(t, nil, "report", out)
	if r.code != 0 || !strings.Contains(r.stdout, "base examples: given, chosen by select-base strategy kmeans") || !strings.Contains(r.stdout, hex.EncodeToString(sum[:])) {
		t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// One line, with the settings as read back from the indented report.json.
	if line, _, _ := strings.Cut(r.stdout[strings.Index(r.stdout, "base examples:"):], "\n"); !strings.Contains(line, "(max_iterations 100, space pixels)") ||
		!strings.Contains(line, hex.EncodeToString(sum[:])) {
		t.Errorf("report: the base examples are not described on one line: %q", line)
	}
	// Extended by a resume that does not name the file: the record keeps it.
	if r := ldtorch(t, nil, "distill", "--resume", out, "--epochs", "2", "--quiet"); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if o2 := readOrigin(t, out); !reflect.DeepEqual(o2, o) {
		t.Fatalf("after a resume: base_origin %+v, before %+v", o2, o)
	}

	// A file chosen under another base seed is refused, naming the flag.
	r = ldtorch(t, nil, selDistill(shared, filepath.Join(dir, "other"), "--base-indices", sel, "--base-seed", "99")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--base-seed") {
		t.Errorf("another base seed: exit %d: %s", r.code, r.stderr)
	}

	// An unbalanced list (2 examples of each of classes 0-4) is recorded as what it is.
	rnd := filepath.Join(dir, "random-20.txt")
	if r := ldtorch(t, nil, "select-base", "--data-dir", shared, "--dataset", "mnist", "--base", "20", "--strategy", "random",
		"--validation-size", "1000", "--threads", "1", "--out", rnd); r.code != 0 {
		t.Fatalf("select-base random: exit %d\n%s", r.code, r.stderr)
	}
	s20, err := selectbase.ReadSelection(rnd)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i, c := range s20.Classes {
		if c < 5 {
			fmt.Fprintf(&text, "%d\n", s20.Indices[i])
		}
	}
	list := filepath.Join(dir, "unbalanced.txt")
	if err := os.WriteFile(list, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "unbalanced")
	if r := ldtorch(t, nil, selDistill(shared, out, "--base-indices", list)...); r.code != 0 {
		t.Fatalf("distill on an unbalanced list: exit %d\n%s", r.code, r.stderr)
	}
	if o := readOrigin(t, out); o.Balanced || o.Strategy != "" || !slices.Equal(o.ClassCounts, []int{2, 2, 2, 2, 2, 0, 0, 0, 0, 0}) {
		t.Fatalf("unbalanced list: base_origin %+v", o)
	}
}

// Two ranks (--nproc 2) share the paper strategy's candidates and write the selection one
// process writes, every score equal.
func TestSelectBaseTwoRanks(t *testing.T) {
	shared := sharedDatasets(t)
	one, two := filepath.Join(t.TempDir(), "sel.txt"), filepath.Join(t.TempDir(), "sel.txt")
	args := func(out string) []string { return append(paperArgs(shared, out), "--candidates", "5") }
	if r := ldtorch(t, nil, args(one)...); r.code != 0 {
		t.Fatalf("1 process: exit %d\n%s", r.code, r.stderr)
	}
	r := runBinary(t, 5*time.Minute, []string{"LDTORCH_DIST_TIMEOUT=60s"}, append(args(two), "--nproc", "2")...)
	if r.code != 0 {
		t.Fatalf("2 ranks: exit %d\n%s", r.code, r.stderr)
	}
	if a, b := mustReadFile(t, one), mustReadFile(t, two); !bytes.Equal(a, b) {
		t.Fatalf("2 ranks chose otherwise:\n%s\n%s", a, b)
	}
	sa, err := selectbase.ReadSelection(one)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := selectbase.ReadSelection(two)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Paper == nil || !reflect.DeepEqual(sa.Paper, sb.Paper) || len(sb.Paper.Candidates) != 5 {
		t.Fatal("the candidates' scores differ between 1 process and 2 ranks")
	}
}

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
