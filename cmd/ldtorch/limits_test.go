package main

// limits_test.go: the rules every command keeps (sweep, study, report, gradvar, --nproc,
// image folders, base indices): bounded input, bounded counts, every artifact readable by every command,
// divergence caught at the step, one writer per folder, messages a user can act on.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// reGzip returns the gzip file b with byte i of its content (after an IDX file's 8-byte
// header) changed to another class: a valid file whose checksum the registry does not know.
func reGzip(t *testing.T, b []byte, i int) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	content, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	content[8+i] = (content[8+i] + 1) % 10
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(content)
	zw.Close()
	return out.Bytes()
}

// TestBoundedInputs: every file a command reads whole is read through a bound that fits
// its kind; an endless stream (/dev/zero) given as one ends at once in an error naming the
// file and the bound (it used to be read until the Go runtime ran out of memory); a
// device put in place of a file ldtorch writes is refused without reading it.
func TestBoundedInputs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"config", []string{"distill", "--config", "/dev/zero", "--out", out}, []string{"--config", "/dev/zero", "16 MiB limit for config files"}},
		{"grid", []string{"sweep", "--grid", "/dev/zero", "--out", out}, []string{"--grid", "/dev/zero", "16 MiB limit for grid files"}},
		{"base indices", []string{"distill", "--base-indices", "/dev/zero", "--out", out, "--dry-run"}, []string{"--base-indices", "/dev/zero", "16 MiB limit for base-index files"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := hostileRun(t, time.Minute, tc.args...)
			wantOneLine(t, r, exitUsage, tc.want...)
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was created", out)
	}

	// A named pipe nobody writes to: opening it waits for a writer, through signals (a
	// command given one could not be interrupted); now a signal ends the wait (exit 130).
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"distill", "--config", fifo, "--dry-run"},
		{"sweep", "--grid", fifo, "--out", out},
		{"distill", "--base-indices", fifo, "--dry-run"},
	} {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // as a signal after a second
		var stdout, stderr bytes.Buffer
		code := runContext(ctx, append([]string{"ldtorch"}, args...), &stdout, &stderr)
		cancel()
		wantOneLine(t, result{code, stdout.String(), stderr.String()}, exitInterrupted, "waiting for a writer to the named pipe")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: ended after %v", args, d)
		}
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // lets the abandoned open return
		}
	}

	// Files the run wrote, replaced by a device or a link loop.
	run := tinyRun(t)
	dev := copyTree(t, run)
	os.Remove(filepath.Join(dev, "report.json"))
	if err := os.Symlink("/dev/zero", filepath.Join(dev, "report.json")); err != nil {
		t.Fatal(err)
	}
	r := hostileRun(t, time.Minute, "evaluate", "--distilled", dev, "--models", "1", "--quiet")
	wantOneLine(t, r, exitUsage, "report.json", "a device, not a regular file")

	hist := copyTree(t, run)
	h := filepath.Join(hist, "metrics.jsonl")
	os.Remove(h)
	if err := os.Symlink(h, h); err != nil { // a link to itself
		t.Fatal(err)
	}
	r = hostileRun(t, time.Minute, "report", hist)
	wantOneLine(t, r, exitFailure, "metrics.jsonl", "too many levels of symbolic links")
	if strings.Contains(r.stderr+r.stdout, "no run history") {
		t.Errorf("a link loop reported as no history: %s", r.stdout)
	}
}

// TestCountLimits: every count a user gives that spawns work or memory has its bound,
// checked before anything starts, in one wording whatever the command.
func TestCountLimits(t *testing.T) {
	run := tinyRun(t)
	shape := func(flag string, lo, hi int, got string) []string {
		return []string{flag + ": must be between " + fmt.Sprint(lo) + " and " + fmt.Sprint(hi) + ", got " + got}
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"nproc", []string{"distill", "--nproc", "100000", "--out", t.TempDir(), "--quiet"}, shape("--nproc", 1, config.MaxProcs(), "100000")},
		{"eval models", []string{"distill", "--eval-models", "5000", "--dry-run"}, shape("--eval-models", 1, 1000, "5000")},
		{"evaluate models", []string{"evaluate", "--distilled", run, "--models", "5000"}, shape("--models", 1, 1000, "5000")},
		{"evaluate steps", []string{"evaluate", "--distilled", run, "--steps", "1000000000000"}, shape("--steps", 1, config.MaxTrainSteps, "1000000000000")},
		{"evaluate steps beyond int64", []string{"evaluate", "--distilled", run, "--steps", "99999999999999999999"}, shape("--steps", 1, config.MaxTrainSteps, "99999999999999999999")},
		{"study models", []string{"study", "steps", "--distilled", run, "--models", "5000"}, shape("--models", 1, 1000, "5000")},
		{"study steps", []string{"study", "steps", "--distilled", run, "--steps", "1000000000000"}, shape("--steps", 1, config.MaxTrainSteps, "1000000000000")},
		{"gradvar models", []string{"gradvar", run, "--models", "5000"}, shape("--models", 2, 1000, "5000")},
		{"gradvar batches", []string{"gradvar", run, "--batches", "100000"}, shape("--batches", 1, config.MaxGradVarBatches, "100000")},
		{"threads", []string{"evaluate", "--distilled", run, "--threads", "100000"}, shape("--threads", 1, config.MaxThreads(), "100000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hostileRun(t, time.Minute, tc.args...)
			wantOneLine(t, r, exitUsage, tc.want...)
			if strings.Contains(r.stderr, "2147483647") {
				t.Errorf("names the int32 limit: %s", r.stderr)
			}
		})
	}
}

// tinyGrid writes a grid of tiny MNIST cells (a few seconds each): rows LD RR ("A, B",
// a label with a comma) and LD ("C"), one column.
func tinyGrid(t *testing.T, dir string, change func(map[string]any)) string {
	t.Helper()
	g := map[string]any{
		"title": "tiny",
		"config": map[string]any{"dataset": "mnist", "base_examples": 20, "inner_batch": 10, "outer_batch": 256,
			"target_set_size": 2000, "epochs": 1, "eval_models": 1, "baselines": []string{}, "reset_window": 5, "threads": 1},
		"rows":    []map[string]any{{"label": "A, B", "set": map[string]any{"method": "rr"}}, {"label": "C", "set": map[string]any{"method": "ld"}}},
		"columns": map[string]any{"key": "seed", "values": []int{1}},
	}
	if change != nil {
		change(g)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("grid-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitForFile waits (at most two minutes) for a non-empty file at path.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForCheckpoint waits (at most two minutes) for a checkpoint in dir.
func waitForCheckpoint(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.npz")); len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint in %s", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStudyHostile: the poor cases of study made clear.
func TestStudyHostile(t *testing.T) {
	run := tinyRun(t)
	r := hostileRun(t, time.Minute, "study", "steps", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "ldtorch study") || strings.Contains(r.stdout+r.stderr, "No help topic") {
		t.Errorf("study steps --help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Flags of another study are refused, not ignored.
	wantOneLine(t, hostileRun(t, time.Minute, "study", "steps", "--distilled", run, "--lr", "0.1"), exitUsage, "--lr does not apply to the steps study")
	wantOneLine(t, hostileRun(t, time.Minute, "study", "optimizer", "--distilled", run, "--optimizers", "adam", "--momentum", "0.9"), exitUsage, "--momentum", "SGD")

	// Edited reports: no config, a newer schema.
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"no config", func(m map[string]any) { delete(m, "config") }, "no \"config\""},
		{"schema 99", func(m map[string]any) { m["schema_version"] = 99 }, "schema_version 99"},
	} {
		dir := copyTree(t, run)
		editFile(t, filepath.Join(dir, "report.json"), func(b []byte) []byte {
			var m map[string]any
			json.Unmarshal(b, &m)
			tc.edit(m)
			b, _ = json.Marshal(m)
			return b
		})
		r := hostileRun(t, time.Minute, "study", "steps", "--distilled", dir)
		wantOneLine(t, r, exitUsage, tc.want)
		if len(r.stderr) > 400 {
			t.Errorf("%s: a %d-character message", tc.name, len(r.stderr))
		}
	}

	// Deltas that leave no step count write nothing over an earlier result.
	dir := copyTree(t, run)
	if r := hostileRun(t, hostileLimit, "study", "steps", "--distilled", dir, "--models", "1", "--deltas=0", "--quiet"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "studies", "steps.json"))
	wantOneLine(t, hostileRun(t, time.Minute, "study", "steps", "--distilled", dir, "--deltas=-400", "--quiet"), exitUsage, "--deltas", "no step count left")
	if after, _ := os.ReadFile(filepath.Join(dir, "studies", "steps.json")); string(after) != string(before) || strings.Contains(string(after), `"settings": null`) {
		t.Error("steps.json changed by a study that had nothing to train")
	}

	// ResNet for greyscale images: what evaluate and study run, distill accepts.
	if r := hostileRun(t, time.Minute, "distill", "--eval-arch", "resnet", "--dry-run"); r.code != 0 {
		t.Errorf("distill --eval-arch resnet on mnist: exit %d: %s", r.code, r.stderr)
	}
}

// writePNGFolder writes an image folder of size×size images (rgba: colour with
// transparency; else 16-bit grey): classes × (train, test) images.
func writePNGFolder(t *testing.T, dir string, rgba bool, classes, train, test, size int) {
	t.Helper()
	for _, part := range []struct {
		name string
		n    int
	}{{"train", train}, {"test", test}} {
		for c := 0; c < classes; c++ {
			d := filepath.Join(dir, part.name, fmt.Sprintf("class%d", c))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < part.n; i++ {
				var img image.Image
				if rgba {
					m := image.NewNRGBA(image.Rect(0, 0, size, size))
					for y := 0; y < size; y++ {
						for x := 0; x < size; x++ {
							v := uint8((x*(c+1)*40 + y*17 + i*7) % 256)
							m.Set(x, y, color.NRGBA{v, uint8(c * 60), 255 - v, uint8((x + i) * 8 % 256)})
						}
					}
					img = m
				} else {
					m := image.NewGray16(image.Rect(0, 0, size, size))
					for y := 0; y < size; y++ {
						for x := 0; x < size; x++ {
							m.Set(x, y, color.Gray16{uint16((x*(c+1)*4000 + y*1700 + i*300) % 65536)})
						}
					}
					img = m
				}
				f, err := os.Create(filepath.Join(d, fmt.Sprintf("%d.png", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := png.Encode(f, img); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
}

// TestEveryCommandReadsEveryArtifact: report, evaluate, study and gradvar on image-folder
// runs (colour with transparency, 16-bit grey), on a run resumed into another --out, and
// on histories with extreme values: drawn, or refused naming the value (report used to
// fail with "internal error while drawing: integer divide by zero" on every image folder).
func TestEveryCommandReadsEveryArtifact(t *testing.T) {
	t.Parallel() // the built binary in child processes only
	tmp := t.TempDir()
	for _, tc := range []struct {
		name string
		rgba bool
		size int
	}{{"rgba", true, 32}, {"gray16", false, 28}} {
		t.Run(tc.name, func(t *testing.T) {
			folder := filepath.Join(tmp, tc.name)
			writePNGFolder(t, folder, tc.rgba, 3, 20, 4, tc.size)
			out := filepath.Join(tmp, tc.name+"-run")
			r := hostileRun(t, hostileLimit, "distill", "--dataset", "imagefolder:"+folder, "--base", "6", "--inner-batch", "3",
				"--outer-batch", "24", "--epochs", "2", "--eval-models", "1", "--baselines", "true", "--baseline-max-steps", "10",
				"--reset-window", "5", "--validation-size", "12", "--threads", "1", "--quiet", "--out", out)
			if r.code != 0 {
				t.Fatalf("distill: exit %d: %s", r.code, r.stderr)
			}
			for _, args := range [][]string{
				{"report", out},
				{"evaluate", "--distilled", out, "--models", "1", "--quiet"},
				{"study", "steps", "--distilled", out, "--models", "1", "--deltas=0", "--quiet"},
				{"gradvar", out, "--models", "2", "--batches", "1", "--warmup", "1", "--quiet"},
			} {
				if r := hostileRun(t, hostileLimit, args...); r.code != 0 {
					t.Errorf("%s: exit %d: %s", args[0], r.code, r.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "figures", "reconstructions.png")); err != nil {
				t.Error(err)
			}
			if tc.rgba {
				return
			}
			// The image folder moved: evaluate and study name it, and read it where it is now.
			// (Where it was is seen by a fresh process: one keeps a folder's facts once read.)
			moved := folder + "-moved"
			if err := os.Rename(folder, moved); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(moved, folder)
			wantOneLine(t, runBinary(t, hostileLimit, nil, "evaluate", "--distilled", out, "--protocol", "ddranking"),
				exitUsage, folder, "cannot be read (moved?)", "imagefolder:PATH")
			for _, args := range [][]string{
				{"evaluate", "--distilled", out, "--models", "1", "--quiet"},
				{"study", "steps", "--distilled", out, "--models", "1", "--deltas=0", "--quiet"},
			} {
				wantOneLine(t, runBinary(t, hostileLimit, nil, args...), exitUsage, folder, "cannot be read (moved?)", "imagefolder:PATH")
				if r := hostileRun(t, hostileLimit, append(args, "--dataset", "imagefolder:"+moved)...); r.code != 0 {
					t.Errorf("%s --dataset imagefolder:%s: exit %d: %s", args[0], moved, r.code, r.stderr)
				}
			}
			wantOneLine(t, hostileRun(t, hostileLimit, "study", "steps", "--distilled", out, "--dataset", "mnist"),
				exitUsage, "--dataset", "distilled for imagefolder:"+folder+", not mnist")
		})
	}

	// Extreme values in the history: a huge loss is drawn; a percentage beyond 100, a
	// number beyond float64, or a word for infinity is refused naming the value and line.
	run := tinyRun(t)
	for _, tc := range []struct {
		name, field, value string
		want               []string
	}{
		{"loss 1e38", "label_loss", "1e38", nil},
		{"loss 1e308", "label_loss", "1e308", nil},
		{"error 1e308", "error", "1e308", []string{"error 1e+308 is not a percentage"}},
		{"loss 1e999", "label_loss", "1e999", []string{"label_loss", "1e999 is out of range"}},
		{"loss Infinity", "label_loss", "Infinity", []string{"invalid character 'I'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyTree(t, run)
			editFile(t, filepath.Join(dir, "metrics.jsonl"), func(b []byte) []byte {
				lines := strings.Split(string(b), "\n")
				for i, l := range lines {
					if strings.Contains(l, `"kind":"step"`) && i%2 == 0 {
						var m map[string]json.RawMessage
						json.Unmarshal([]byte(l), &m)
						m[tc.field] = json.RawMessage("0")
						nb, _ := json.Marshal(m)
						lines[i] = strings.Replace(string(nb), `"`+tc.field+`":0`, `"`+tc.field+`":`+tc.value, 1)
					}
				}
				return []byte(strings.Join(lines, "\n"))
			})
			r := hostileRun(t, time.Minute, "report", dir)
			if tc.want == nil {
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
				return
			}
			wantOneLine(t, r, exitFailure, append([]string{"metrics.jsonl", "line "}, tc.want...)...)
		})
	}
}

// TestGradvarLikeTheOthers: gradvar prints progress, ends with exit 130 on a signal like
// every other command (it exited 1 with "context canceled"), and finds an unwritable folder
// before it computes anything (it used to compute everything first).
func TestGradvarLikeTheOthers(t *testing.T) {
	run := copyTree(t, tinyRun(t))
	s := startBinary(t, "gradvar", run, "--models", "200", "--batches", "50", "--warmup", "50")
	s.waitFor(t, "fresh models", time.Minute)
	s.cmd.Process.Signal(os.Interrupt)
	if code := s.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("exit %d:\n%s", code, s.log.String())
	}
	if strings.Contains(s.log.String(), "context canceled") {
		t.Errorf("says context canceled:\n%s", s.log.String())
	}
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only folders")
	}
	os.Chmod(run, 0o555)
	defer os.Chmod(run, 0o755)
	start := time.Now()
	wantOneLine(t, hostileRun(t, time.Minute, "gradvar", run, "--quiet"), exitUsage, "not writable", "gradvar.json")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %v", d)
	}
}

// TestDivergenceEndsTheRun: without checkpoints (--checkpoint-every -1), a run whose
// state goes non-finite stops at that meta-step naming the flag most likely at fault and
// writes no artifact (it used to score the diverged labels: 9.8 %, exit 0).
func TestDivergenceEndsTheRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	r := hostileRun(t, hostileLimit, tinyDistill(sharedDatasets(t), out, "--checkpoint-every", "-1", "--scale-init", "1e30", "--quiet")...)
	wantOneLine(t, r, exitFailure, "meta-step 1", "diverged", "--scale-init 1e+30 is too large")
	noArtifact(t, out)
}

// TestMessagesNameWhatToDo: hints that hold every flag needed, settings named as the user gave
// them, and the poor cases of resume, base indices and data.
func TestMessagesNameWhatToDo(t *testing.T) {
	shared := sharedDatasets(t)
	run := tinyRun(t)

	// Another --dataset beside --resume is named as such (it used to blame base_selection).
	wantOneLine(t, hostileRun(t, time.Minute, "distill", "--resume", copyTree(t, run), "--dataset", "kmnist", "--dry-run"),
		exitUsage, "--resume", `dataset: "mnist" -> "kmnist"`)

	// The interrupt hint repeats --data-dir and --threads.
	out := filepath.Join(t.TempDir(), "out")
	s := startBinary(t, tinyDistill(shared, out, "--epochs", "1000", "--checkpoint-every", "4", "--validate-every", "500")...)
	waitForCheckpoint(t, filepath.Join(out, "checkpoints"))
	s.cmd.Process.Signal(os.Interrupt)
	if code := s.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("exit %d", code)
	}
	if want := "continue with: ldtorch distill --resume " + out + " --data-dir " + shared + " --threads 1"; !strings.Contains(s.log.String(), want) {
		t.Errorf("no %q in:\n%s", want, s.log.String())
	}

	// A damaged line in the middle of the history is dropped on resume with a warning.
	editFile(t, filepath.Join(out, "metrics.jsonl"), func(b []byte) []byte {
		lines := strings.SplitAfter(string(b), "\n")
		lines[2] = "{garbage\n"
		return []byte(strings.Join(lines, ""))
	})
	s = startBinary(t, "distill", "--resume", out, "--quiet")
	s.waitFor(t, "line 3 is not a history line", 2*time.Minute)
	s.cmd.Process.Signal(os.Interrupt)
	s.exitWithin(t, signalLimit)

	// Unbalanced base indices are recorded as given, not balanced; balanced is checked.
	art, err := artifact.Read(run)
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for i, c := range art.BaseClasses { // two examples of each of the classes 0 to 4
		if c < 5 {
			picked = append(picked, fmt.Sprint(art.BaseIndices[i]))
		}
	}
	if len(picked) != 10 {
		t.Fatalf("the tiny run's base classes %v", art.BaseClasses)
	}
	idx := filepath.Join(t.TempDir(), "idx.txt")
	os.WriteFile(idx, []byte(strings.Join(picked, " ")+"\n"), 0o644)
	out2 := filepath.Join(t.TempDir(), "given")
	if r := hostileRun(t, hostileLimit, append(tinyDistill(shared, out2, "--quiet", "--epochs", "1"), "--base-indices", idx, "--base", "10", "--inner-batch", "5")...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := readReport(t, out2)["config"].(map[string]any)["base_selection"]; got != "given" {
		t.Errorf("base_selection %v, want given", got)
	}
	wantOneLine(t, hostileRun(t, hostileLimit, append(tinyDistill(shared, filepath.Join(t.TempDir(), "b"), "--quiet", "--epochs", "1"),
		"--base-indices", idx, "--base", "10", "--inner-batch", "5", "--base-selection", "balanced")...), exitUsage, "--base-selection", "not")

	// Data with an unknown checksum: evaluate names --allow-unknown-data and takes it, and
	// warns that the test file changed since the artifact was made.
	data := copyMNIST(t, shared)
	editFile(t, filepath.Join(data, "mnist", "t10k-labels-idx1-ubyte.gz"), func(b []byte) []byte { return reGzip(t, b, 0) })
	r := hostileRun(t, hostileLimit, "evaluate", "--distilled", run, "--data-dir", data, "--models", "1", "--quiet")
	wantOneLine(t, r, exitUsage, "--allow-unknown-data")
	r = hostileRun(t, hostileLimit, "evaluate", "--distilled", run, "--data-dir", data, "--models", "1", "--quiet", "--allow-unknown-data")
	if r.code != 0 || !strings.Contains(r.stderr, "changed since the artifact was made") {
		t.Errorf("--allow-unknown-data: exit %d, stderr %q", r.code, r.stderr)
	}
}
