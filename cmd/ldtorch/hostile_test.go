// Hostile and broken inputs end to end through the ldtorch command line: corrupt data files, a
// tampered distilled.npz or report.json, tampered checkpoints, absurd flag values and config
// files. Each must end with one clear line on stderr and a non-zero exit code, and must not
// lose anything: an artifact and checkpoints already in --out stay byte-identical. The runs
// are tiny (20 base examples, 2000 target images, 2 epochs, one evaluation model, 1 thread).

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// mnistFiles are the four files of the mnist data folder.
var mnistFiles = []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}

// tinyDistill is the argument list of a tiny real-MNIST RR run (16 meta-steps, a few seconds).
func tinyDistill(dataDir, out string, extra ...string) []string {
	return append([]string{"distill", "--data-dir", dataDir, "--dataset", "mnist", "--method", "rr",
		"--base", "20", "--inner-batch", "10", "--outer-batch", "256", "--target-set-size", "2000",
		"--epochs", "2", "--eval-models", "1", "--baselines", "none", "--reset-window", "10",
		"--threads", "1", "--out", out}, extra...)
}

// hostileRun runs the CLI in-process like ldtorch but cancels it after limit: a hostile
// value must fail fast, not hang the test.
func hostileRun(t *testing.T, limit time.Duration, args ...string) result {
	t.Helper()
	return runCLI(t, limit, nil, args...)
}

// hostileRunEnv is hostileRun with extra environment variables ("NAME=value").
func hostileRunEnv(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	return runCLI(t, limit, env, args...)
}

// wantOneLine checks a failed run: exit code want (any non-zero, non-crash code when want is
// -1), exactly one line on stderr containing every substring, no panic or stack trace.
func wantOneLine(t *testing.T, r result, want int, subs ...string) {
	t.Helper()
	msg := strings.TrimSuffix(r.stderr, "\n")
	switch {
	case want == -1 && (r.code == 0 || r.code > 2):
		t.Errorf("exit %d, want 1 or 2; stderr %q", r.code, r.stderr)
	case want != -1 && r.code != want:
		t.Errorf("exit %d, want %d; stderr %q", r.code, want, r.stderr)
	}
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("want one line on stderr, got %q", r.stderr)
	}
	for _, s := range subs {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not mention %q", msg, s)
		}
	}
	for _, bad := range []string{"panic", "goroutine", "internal error", "SIGSEGV"} {
		if strings.Contains(r.stderr+r.stdout, bad) {
			t.Errorf("output contains %q:\n%s%s", bad, r.stdout, r.stderr)
		}
	}
}

// snapshot reads every regular file under dir (relative path → bytes).
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockFile { // the lock file holds the last run's PID
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles fails unless dir holds exactly the files of before, byte for byte.
func sameFiles(t *testing.T, dir string, before map[string][]byte) {
	t.Helper()
	after := snapshot(t, dir)
	for name, b := range before {
		if a, ok := after[name]; !ok {
			t.Errorf("%s: %s was removed", dir, name)
		} else if !bytes.Equal(a, b) {
			t.Errorf("%s: %s changed", dir, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s: %s appeared", dir, name)
		}
	}
}

// noArtifact fails if out holds an artifact file or a checkpoint.
func noArtifact(t *testing.T, out string) {
	t.Helper()
	for _, f := range []string{"distilled.npz", "report.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("a failed run wrote %s", filepath.Join(out, f))
		}
	}
	if m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*")); len(m) > 0 {
		t.Errorf("a failed run wrote checkpoints %v", m)
	}
}

// copyMNIST copies the shared MNIST files into a fresh, writable data folder.
func copyMNIST(t *testing.T, shared string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range mnistFiles {
		b, err := os.ReadFile(filepath.Join(shared, "mnist", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mnist", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editFile rewrites a file through edit.
func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipMiddle inverts n bytes in the middle of b.
func flipMiddle(n int) func([]byte) []byte {
	return func(b []byte) []byte {
		b = slices.Clone(b)
		for i := len(b) / 2; i < len(b)/2+n && i < len(b); i++ {
			b[i] ^= 0xff
		}
		return b
	}
}

// garbage is deterministic non-gzip bytes.
func garbage(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// tinyRunOnce is the output folder of one tinyDistill run (artifact, checkpoints and
// history), shared by the tests that only read it or work on a copy (copyTree, copyDir).
var tinyRunOnce struct {
	sync.Once
	dir string
	err error
}

// tinyRun returns the folder of the shared tiny run (made on first use; read it, do not
// change it).
func tinyRun(t *testing.T) string {
	t.Helper()
	shared := sharedDatasets(t)
	tinyRunOnce.Do(func() {
		dir := filepath.Join(testTmp, "tiny-run")
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"ldtorch"}, tinyDistill(shared, dir, "--quiet")...), &stdout, &stderr); code != 0 {
			tinyRunOnce.err = fmt.Errorf("the shared tiny run: exit %d: %s", code, stderr.String())
		}
		tinyRunOnce.dir = dir
	})
	if tinyRunOnce.err != nil {
		t.Fatal(tinyRunOnce.err)
	}
	return tinyRunOnce.dir
}

// copyTree copies src (files and sub-folders, not the lock file) into a fresh folder.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if d.Name() == lockFile {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// copyDir copies the regular files of src (not sub-folders) into a fresh folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

const hostileLimit = 3 * time.Minute // generous: the machine may be heavily loaded

// TestHostileDataFiles: a corrupt MNIST file is a data problem (exit 2) named in one line,
// found before any meta-step, and nothing is written into --out.
func TestHostileDataFiles(t *testing.T) {
	shared := sharedDatasets(t)
	cases := []struct {
		name, file string
		corrupt    func(path string)
		want       []string
	}{
		{"truncated train images", "train-images-idx3-ubyte.gz", func(p string) {
			editFile(t, p, func(b []byte) []byte { return b[:len(b)/2] })
		}, []string{"train-images-idx3-ubyte.gz", "truncated"}},
		{"flipped bytes in the labels", "train-labels-idx1-ubyte.gz", func(p string) {
			editFile(t, p, flipMiddle(16))
		}, []string{"train-labels-idx1-ubyte.gz", "corrupt"}},
		{"garbage test images", "t10k-images-idx3-ubyte.gz", func(p string) {
			editFile(t, p, func([]byte) []byte { return garbage(5000) })
		}, []string{"t10k-images-idx3-ubyte.gz"}},
		{"empty train labels", "train-labels-idx1-ubyte.gz", func(p string) {
			editFile(t, p, func([]byte) []byte { return nil })
		}, []string{"train-labels-idx1-ubyte.gz"}},
		{"deleted test labels", "t10k-labels-idx1-ubyte.gz", func(p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, []string{"t10k-labels-idx1-ubyte", "ldtorch data fetch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dataDir := copyMNIST(t, shared)
			c.corrupt(filepath.Join(dataDir, "mnist", c.file))
			out := filepath.Join(t.TempDir(), "out")
			r := hostileRun(t, hostileLimit, tinyDistill(dataDir, out, "--quiet")...)
			wantOneLine(t, r, exitUsage, c.want...)
			noArtifact(t, out)
		})
	}
}

// TestHostileArtifact: a real artifact, tampered in a copy, is refused by evaluate with one
// line naming the file (exit 2) before anything trains.
func TestHostileArtifact(t *testing.T) {
	shared := sharedDatasets(t)
	art := tinyRun(t)
	arc, err := npz.ReadFile(filepath.Join(art, "distilled.npz"))
	if err != nil {
		t.Fatal(err)
	}
	images, labels, indices := arc.Get("images"), arc.Get("labels"), arc.Get("base_indices")
	if images == nil || labels == nil || indices == nil || !slices.Equal(labels.Shape, []int{20, 10}) {
		t.Fatalf("artifact members: %v, labels %v", arc.Names(), labels.Shape)
	}
	// withLabels replaces the labels (values edited by edit) and keeps the rest.
	withLabels := func(shape []int, edit func([]float32) []float32) func(string) {
		return func(dir string) {
			v := edit(slices.Clone(labels.Data.([]float32)))
			l := &npz.Array{Name: "labels", DType: "float32", Shape: shape, Data: v}
			if err := npz.WriteFile(filepath.Join(dir, "distilled.npz"), []*npz.Array{images, l, indices}); err != nil {
				t.Fatal(err)
			}
		}
	}
	npzPath := func(dir string) string { return filepath.Join(dir, "distilled.npz") }
	reportPath := func(dir string) string { return filepath.Join(dir, "report.json") }
	editReport := func(edit func(map[string]any)) func(string) {
		return func(dir string) {
			editFile(t, reportPath(dir), func(b []byte) []byte {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				edit(m)
				out, _ := json.Marshal(m)
				return out
			})
		}
	}
	eval := []string{"--steps", "5", "--models", "1", "--threads", "1", "--quiet", "--data-dir", shared}
	cases := []struct {
		name   string
		tamper func(dir string)
		args   []string // instead of eval
		want   []string
	}{
		{"truncated npz", func(d string) { editFile(t, npzPath(d), func(b []byte) []byte { return b[:len(b)/2] }) }, nil, []string{"distilled.npz", "zip"}},
		{"empty npz", func(d string) { editFile(t, npzPath(d), func([]byte) []byte { return nil }) }, nil, []string{"distilled.npz"}},
		{"flipped bytes in the npz", func(d string) { editFile(t, npzPath(d), flipMiddle(4)) }, nil, []string{"distilled.npz"}},
		{"npz replaced by garbage", func(d string) { editFile(t, npzPath(d), func([]byte) []byte { return garbage(64434) }) }, nil, []string{"distilled.npz"}},
		{"a NaN label", withLabels([]int{20, 10}, func(v []float32) []float32 { v[57] = float32(math.NaN()); return v }), nil, []string{"distilled.npz", "label row 5", "NaN"}},
		{"an infinite label", withLabels([]int{20, 10}, func(v []float32) []float32 { v[3] = float32(math.Inf(1)); return v }), nil, []string{"distilled.npz", "label row 0"}},
		{"a row summing to 2", withLabels([]int{20, 10}, func(v []float32) []float32 {
			for i := 190; i < 200; i++ {
				v[i] *= 2
			}
			return v
		}), nil, []string{"distilled.npz", "label row 19 sums to"}},
		{"a negative label", withLabels([]int{20, 10}, func(v []float32) []float32 { v[11] -= 1; v[12] += 1; return v }), nil, []string{"distilled.npz", "label row 1"}},
		{"a label row too many", withLabels([]int{21, 10}, func(v []float32) []float32 { return append(v, v[:10]...) }), nil, []string{"distilled.npz", "labels", "20 images"}},
		{"flat labels", withLabels([]int{200}, func(v []float32) []float32 { return v }), nil, []string{"distilled.npz", "labels"}},
		{"labels for 5 classes", withLabels([]int{40, 5}, func(v []float32) []float32 { return v }), nil, []string{"distilled.npz", "labels"}},
		{"no labels", func(d string) {
			if err := npz.WriteFile(npzPath(d), []*npz.Array{images, indices}); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"distilled.npz", "labels"}},
		{"missing npz", func(d string) { os.Remove(npzPath(d)) }, nil, []string{"--distilled", "distilled.npz"}},
		{"report.json not JSON", func(d string) { editFile(t, reportPath(d), func(b []byte) []byte { return b[:len(b)/3] }) }, nil, []string{"report.json"}},
		{"report.json with a wrong type", editReport(func(m map[string]any) { m["steps"] = "seven" }), nil, []string{"report.json"}},
		{"report.json is a folder", func(d string) {
			os.Remove(reportPath(d))
			os.Mkdir(reportPath(d), 0o755)
		}, nil, []string{"report.json"}},
		// report.json's values are checked against each other and the artifact.
		{"report.json with negative steps", editReport(func(m map[string]any) { m["steps"] = -5 }),
			[]string{"--models", "1", "--threads", "1", "--quiet", "--data-dir", shared}, []string{"report.json", "steps", "-5"}},
		{"report.json with steps 2e9", editReport(func(m map[string]any) { m["steps"] = 2e9 }), nil, []string{"report.json", "steps", "2000000000"}},
		{"report.json with eval_models 1e9", editReport(func(m map[string]any) { m["config"].(map[string]any)["eval_models"] = 1e9 }), nil,
			[]string{"report.json", "eval_models", "1000000000"}},
		{"report.json for another dataset", editReport(func(m map[string]any) {
			m["target"] = "cifar10"
			m["config"].(map[string]any)["dataset"] = "cifar10"
		}), nil, []string{"report.json", "cifar10"}},
		{"report.json for another dataset of the same shape", editReport(func(m map[string]any) {
			m["target"] = "kmnist"
			m["config"].(map[string]any)["dataset"] = "kmnist"
			m["config"].(map[string]any)["source"] = "kmnist"
		}), nil, []string{"report.json", "data_sha256", "mnist/", "kmnist"}},
		// distilled.npz and report.json must be one pair: a valid npz of other labels (another
		// run's, or one written just before a kill left the old report) is named.
		{"distilled.npz of another run", withLabels([]int{20, 10}, func(v []float32) []float32 {
			return append(slices.Clone(v[10:]), v[:10]...) // rows rotated: valid, but not these labels
		}), nil, []string{"distilled.npz does not belong to", "report.json", "SHA-256"}},
		{"no report.json, no --dataset", func(d string) { os.Remove(reportPath(d)) }, nil, []string{"--dataset", "report.json"}},
		{"no report.json, no --steps", func(d string) { os.Remove(reportPath(d)) },
			[]string{"--dataset", "mnist", "--models", "1", "--quiet", "--data-dir", shared}, []string{"--steps", "report.json"}},
		{"no report.json, --dataset of other images", func(d string) { os.Remove(reportPath(d)) },
			[]string{"--dataset", "cifar10", "--steps", "5", "--models", "1", "--quiet", "--data-dir", shared}, []string{"--dataset cifar10", "3×32×32", "1×28×28"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, art)
			c.tamper(dir)
			args := c.args
			if args == nil {
				args = eval
			}
			r := hostileRun(t, hostileLimit, append([]string{"evaluate", "--distilled", dir}, args...)...)
			wantOneLine(t, r, exitUsage, c.want...)
		})
	}
	// Without report.json, --dataset and --steps are enough.
	t.Run("no report.json with --dataset and --steps", func(t *testing.T) {
		dir := copyDir(t, art)
		os.Remove(reportPath(dir))
		r := hostileRun(t, hostileLimit, append([]string{"evaluate", "--distilled", dir, "--dataset", "mnist"}, eval...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "5 steps, 1 models") {
			t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestHostileCheckpoints: a corrupt newest checkpoint is skipped with a warning and the
// resumed run still writes the uninterrupted run's artifact byte for byte; with every
// checkpoint corrupt, --resume fails in one line (exit 2) and the artifact already in --out
// is untouched.
func TestHostileCheckpoints(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	args := tinyDistill(shared, out, "--checkpoint-every", "3")
	if r := hostileRun(t, hostileLimit, append(args, "--quiet")...); r.code != 0 {
		t.Fatalf("distill: exit %d: %s", r.code, r.stderr)
	}
	first, err := os.ReadFile(filepath.Join(out, "distilled.npz"))
	if err != nil {
		t.Fatal(err)
	}
	ckpts, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz"))
	slices.Sort(ckpts)
	if len(ckpts) != 3 || filepath.Base(ckpts[2]) != "ckpt-000000016.npz" {
		t.Fatalf("checkpoints %v, want the newest 3 ending with step 16", ckpts)
	}

	editFile(t, ckpts[2], flipMiddle(1))
	r := hostileRun(t, hostileLimit, append(args, "--resume", out)...)
	if r.code != 0 {
		t.Fatalf("resume past a corrupt checkpoint: exit %d\n%s", r.code, r.stderr)
	}
	for _, w := range []string{"warning: skipping invalid checkpoint", "ckpt-000000016.npz", "resumed from", "ckpt-000000015.npz"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("resume log lacks %q:\n%s", w, r.stderr)
		}
	}
	if again, err := os.ReadFile(filepath.Join(out, "distilled.npz")); err != nil || !bytes.Equal(again, first) {
		t.Errorf("resumed from step 15: distilled.npz differs from the uninterrupted run's (%v)", err)
	}

	// Every checkpoint broken in another way: resume fails, the artifact stays.
	ckpts, _ = filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz"))
	slices.Sort(ckpts)
	if len(ckpts) != 3 {
		t.Fatalf("checkpoints after the resume: %v", ckpts)
	}
	editFile(t, ckpts[0], func(b []byte) []byte { return b[:len(b)-100] })
	editFile(t, ckpts[1], func([]byte) []byte { return garbage(1000) })
	editFile(t, ckpts[2], flipMiddle(1))
	before := snapshot(t, out)
	r = hostileRun(t, hostileLimit, append(args, "--quiet", "--resume", out)...)
	wantOneLine(t, r, exitUsage, "--resume", "no valid checkpoint", filepath.Base(ckpts[0]), filepath.Base(ckpts[2]))
	sameFiles(t, out, before)

	// A checkpoints folder holding only a stray file and a temporary file.
	empty := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(filepath.Join(empty, "checkpoints"), 0o755)
	os.WriteFile(filepath.Join(empty, "checkpoints", "notes.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(empty, "checkpoints", ".ckpt-000000003.npz.tmp-1"), garbage(100), 0o644)
	r = hostileRun(t, hostileLimit, append(tinyDistill(shared, filepath.Join(t.TempDir(), "o"), "--quiet"), "--resume", empty)...)
	wantOneLine(t, r, exitUsage, "--resume")
}

// TestHostileNothingLost: failing runs into an --out that holds a finished run's artifact
// and checkpoints leave every file byte-identical.
func TestHostileNothingLost(t *testing.T) {
	shared := sharedDatasets(t)
	out := copyTree(t, tinyRun(t))
	before := snapshot(t, out)
	if before["distilled.npz"] == nil || before["report.json"] == nil {
		t.Fatalf("no artifact in %s: %v", out, before)
	}
	bad := copyMNIST(t, shared)
	editFile(t, filepath.Join(bad, "mnist", "train-images-idx3-ubyte.gz"), func(b []byte) []byte { return b[:len(b)-1000] })
	noCkpt := t.TempDir()
	cases := []struct {
		name string
		code int // -1: 1 or 2
		args []string
		want []string
	}{
		{"corrupt data", exitUsage, tinyDistill(bad, out, "--quiet", "--checkpoint-every", "-1", "--overwrite"), []string{"train-images-idx3-ubyte.gz"}},
		{"fresh run into a folder holding another run", exitUsage, tinyDistill(shared, out, "--quiet"), []string{"--out", out, "checkpoint", "--resume " + out, "--overwrite"}},
		{"fresh run without checkpoints into a folder holding another run", exitUsage, tinyDistill(shared, out, "--quiet", "--checkpoint-every", "-1"), []string{"--out", out, "artifact", "--overwrite"}},
		{"outer batch 0", exitUsage, tinyDistill(shared, out, "--quiet", "--outer-batch", "0"), []string{"--outer-batch"}},
		{"device cuda", exitUsage, tinyDistill(shared, out, "--quiet", "--device", "cuda"), []string{"--device", "CUDA"}},
		{"resume from a folder without checkpoints", exitUsage, tinyDistill(shared, out, "--quiet", "--resume", noCkpt), []string{"--resume"}},
		{"resume with other settings", exitUsage, tinyDistill(shared, out, "--quiet", "--resume", out, "--label-lr", "0.5"), []string{"--resume", "label_lr"}},
		// Refused before the run announces itself (no "will be replaced" line first).
		{"resume with other settings, not quiet", exitUsage, tinyDistill(shared, out, "--resume", out, "--label-lr", "0.5"), []string{"--resume", "label_lr"}},
		{"non-finite labels", 1, tinyDistill(shared, out, "--quiet", "--label-lr", "1e308", "--checkpoint-every", "-1", "--overwrite"), []string{"non-finite", "meta-step 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hostileRun(t, hostileLimit, c.args...)
			wantOneLine(t, r, c.code, c.want...)
			want := before
			if slices.Contains(c.args, "--overwrite") && c.code == 1 {
				// A run that started over (--overwrite) has replaced the run history
				// (metrics.jsonl) with its own; artifact and checkpoints stay.
				want = maps.Clone(before)
				if b, err := os.ReadFile(filepath.Join(out, "metrics.jsonl")); err == nil {
					want["metrics.jsonl"] = b
				}
			}
			sameFiles(t, out, want)
		})
	}
}
