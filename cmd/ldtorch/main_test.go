// Tests of the ldtorch command line: exit codes and one-line messages for bad
// input, configuration precedence, the data commands and an end-to-end distill + evaluate
// on real MNIST (skipped when ../shared/datasets is absent).

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/devicetest"
)

// Most tests call the CLI in-process (runContext, the binary's own entry point, with
// buffers for stdout and stderr): a call costs no process start and no libtorch load. A few
// start the built binary: exit codes as the shell sees them, signals, SIGKILL and the
// allocator re-exec.

// binaryPath is the ldtorch binary, built on first use by builtBinary.
var (
	binaryPath  string
	binaryOnce  sync.Once
	binaryError error
	testTmp     string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	testTmp, err = os.MkdirTemp("", "ldtorch-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(testTmp)
	// In-process calls see a clean LDTORCH_* environment, with LDTORCH_DATA at an empty
	// folder so nothing reads ~/.cache; one libtorch thread (the machine is shared).
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LDTORCH_") {
			os.Unsetenv(k)
		}
	}
	empty := filepath.Join(testTmp, "no-data")
	if err := os.Mkdir(empty, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("LDTORCH_DATA", empty)
	os.Setenv("OMP_NUM_THREADS", "1")
	// The command's check of libtorch's oneDNN convolutions (convcheck.go), once for the
	// suite: where it switches oneDNN off, in-process calls find it off and started binaries
	// are told so (binaryCommand), so that its warning does not add a line to the stderr of
	// the tests that want exactly one. TestConvolutionCheck runs the check itself.
	flag.Parse()
	if g := devicetest.GuardConvolutions("cmd", testing.Verbose()); g.TurnedOff {
		binaryMkldnn = torch.MkldnnEnv + "=off"
	}
	return m.Run()
}

// binaryMkldnn is LDTORCH_MKLDNN=off where testMain's check switched oneDNN off, else "".
var binaryMkldnn string

// builtBinary builds the ldtorch binary once and returns its path.
func builtBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryPath = filepath.Join(testTmp, "ldtorch")
		build := exec.Command("go", "build", "-o", binaryPath, ".")
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			binaryError = fmt.Errorf("building ldtorch: %v\n%s", err, out.String())
		}
	})
	if binaryError != nil {
		t.Fatal(binaryError)
	}
	return binaryPath
}

type result struct {
	code           int
	stdout, stderr string
}

// ldtorch runs the CLI in-process with extra environment variables ("NAME=value"), set
// for the call only (so tests that pass variables must not run in parallel).
func ldtorch(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runCLI(t, 0, env, args...)
}

// runCLI is ldtorch with a time limit (none when limit is 0): a call still going after
// limit is cancelled (as by a signal) and fails the test.
func runCLI(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	restore := setEnv(t, env)
	defer restore()
	ctx := context.Background()
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	code := runContext(ctx, append([]string{"ldtorch"}, args...), &stdout, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("ldtorch %v: still running after %v (cancelled)\nstderr: %s", args, limit, stderr.String())
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// setEnv sets variables ("NAME=value") and returns the function that restores them.
func setEnv(t *testing.T, env []string) func() {
	t.Helper()
	type old struct {
		name, value string
		set         bool
	}
	var olds []old
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		ov, set := os.LookupEnv(k)
		olds = append(olds, old{k, ov, set})
		os.Setenv(k, v)
	}
	return func() {
		for i := len(olds) - 1; i >= 0; i-- {
			if o := olds[i]; o.set {
				os.Setenv(o.name, o.value)
			} else {
				os.Unsetenv(o.name)
			}
		}
	}
}

// binaryCommand is the built binary with args, a clean LDTORCH_* environment (LDTORCH_DATA
// at an empty folder) plus env.
func binaryCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(builtBinary(t), args...)
	// Neither ldtorch's variables nor allocator settings the suite runs under
	// (scripts/test.sh): the binary starts as from a user's shell and tunes malloc itself.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LDTORCH_") && !strings.HasPrefix(kv, "MALLOC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Later entries win over earlier ones with the same name (os/exec keeps the last).
	cmd.Env = append(cmd.Env, "LDTORCH_DATA="+t.TempDir())
	if binaryMkldnn != "" {
		cmd.Env = append(cmd.Env, binaryMkldnn)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// runBinary runs the built binary (binaryCommand) with a time limit (none when limit is 0):
// a run still going after limit is killed and fails the test.
func runBinary(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	cmd := binaryCommand(t, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if limit > 0 {
		timeout = time.After(limit)
	}
	var err error
	select {
	case err = <-done:
	case <-timeout:
		cmd.Process.Kill()
		<-done
		t.Fatalf("ldtorch %v: still running after %v (killed)\nstderr: %s", args, limit, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running ldtorch %v: %v", args, err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// sharedDatasets returns ../shared/datasets or skips the test.
func sharedDatasets(t *testing.T) string {
	t.Helper()
	dir, err := findSharedDatasets(".")
	if err != nil {
		t.Skipf("no shared datasets: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mnist", "train-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("no MNIST in %s", dir)
	}
	return dir
}

func TestVersion(t *testing.T) {
	r := ldtorch(t, nil, "version")
	if r.code != 0 {
		t.Fatalf("version: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"ldtorch", version, "libtorch", "shim ABI", "CUDA", "threads", "GOMAXPROCS", "LRN, max-pool and ConvNet-3 block loops of the shim, " + torch.SIMDLoopsISA()} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = ldtorch(t, nil, "version", "--short")
	if r.code != 0 || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 || !strings.HasPrefix(r.stdout, "ldtorch "+version) {
		t.Errorf("version --short: exit %d, %q", r.code, r.stdout)
	}
	r = ldtorch(t, nil, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 {
		t.Fatalf("version --json: exit %d, %v: %q", r.code, err, r.stdout)
	}
	if v.Version != version || v.Libtorch == "" || v.ShimABI != v.WantABI || v.GOMAXPROCS < 1 || (v.SIMDLoops != "avx2" && v.SIMDLoops != "baseline") {
		t.Errorf("version --json: %+v", v)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "bad-key.json")
	if err := os.WriteFile(badKey, []byte(`{"epochs": 3, "bogus_key": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	badValue := filepath.Join(dir, "bad-value.json")
	if err := os.WriteFile(badValue, []byte(`{"base_examples": -7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir() // an empty data folder: a run that got past validation fails differently
	out := filepath.Join(dir, "out")
	distill := func(args ...string) []string {
		return append([]string{"distill", "--data-dir", empty, "--out", out, "--quiet"}, args...)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string // substrings of the one-line message
	}{
		{"unknown flag", nil, distill("--bogus", "3"), []string{"--bogus"}},
		{"base 0", nil, distill("--base", "0"), []string{"--base", "positive"}},
		{"base -3", nil, distill("--base", "-3"), []string{"--base", "-3"}},
		{"base not a number", nil, distill("--base", "abc"), []string{"--base", "abc"}},
		{"epochs -1", nil, distill("--epochs", "-1"), []string{"--epochs", "-1"}},
		{"epochs huge", nil, distill("--epochs", "99999999999"), []string{"--epochs", "range"}},
		{"method foo", nil, distill("--method", "foo"), []string{"--method", "foo"}},
		{"dataset nope", nil, distill("--dataset", "nope"), []string{"--dataset", "nope"}},
		{"inner batch over base", nil, distill("--inner-batch", "500", "--base", "100"), []string{"--inner-batch", "500", "--base"}},
		{"label lr NaN", nil, distill("--label-lr", "NaN"), []string{"--label-lr", "NaN"}},
		{"model lr Inf", nil, distill("--model-lr", "Inf"), []string{"--model-lr"}},
		{"eval models 0", nil, distill("--eval-models", "0"), []string{"--eval-models"}},
		{"unknown baseline", nil, distill("--baselines", "true,bogus"), []string{"--baselines", "bogus"}},
		{"betas", nil, distill("--model-betas", "0.9"), []string{"--model-betas"}},
		{"colour source for greyscale target", nil, distill("--source", "cifar10"), []string{"--source", "cifar10"}},
		{"alexnet for mnist", nil, distill("--eval-arch", "alexnet"), []string{"--eval-arch", "alexnet"}},
		{"device", nil, distill("--device", "gpu"), []string{"--device", "gpu"}},
		{"stray argument", nil, distill("mnist"), []string{"mnist"}},
		{"env value", []string{"LDTORCH_EPOCHS=-2"}, distill(), []string{"LDTORCH_EPOCHS"}},
		{"env not a number", []string{"LDTORCH_BASE=many"}, distill(), []string{"LDTORCH_BASE", "many"}},
		{"config unknown key", nil, distill("--config", badKey), []string{"bogus_key", badKey}},
		{"config bad value", nil, distill("--config", badValue), []string{"base_examples", badValue}},
		{"config missing", nil, distill("--config", filepath.Join(dir, "missing.json")), []string{"--config", "missing.json"}},
		{"out unwritable", nil, append([]string{"distill", "--data-dir", empty, "--quiet", "--base", "10"}, "--out", filepath.Join(file, "out")), []string{"--out", file}},
		{"missing data", nil, distill("--base", "10", "--epochs", "1"), []string{"mnist", "ldtorch data fetch"}},
		{"unknown command", nil, []string{"distil"}, []string{"distil"}},
		{"evaluate without --distilled", nil, []string{"evaluate"}, []string{"--distilled"}},
		{"evaluate missing artifact", nil, []string{"evaluate", "--distilled", filepath.Join(dir, "none")}, []string{"--distilled", "distilled.npz"}},
		{"evaluate lr NaN", nil, []string{"evaluate", "--distilled", dir, "--lr", "NaN"}, []string{"--lr", "NaN"}},
		{"evaluate optimizer", nil, []string{"evaluate", "--distilled", dir, "--optimizer", "rmsprop"}, []string{"--optimizer", "rmsprop"}},
		{"evaluate steps", nil, []string{"evaluate", "--distilled", dir, "--steps", "-4"}, []string{"--steps", "-4"}},
		{"evaluate momentum with adam", nil, []string{"evaluate", "--distilled", dir, "--momentum", "0.9"}, []string{"--momentum"}},
		{"evaluate protocol", nil, []string{"evaluate", "--distilled", dir, "--protocol", "dd-ranking"}, []string{"--protocol", `"dd-ranking"`, "paper or ddranking"}},
		{"evaluate epochs with paper", nil, []string{"evaluate", "--distilled", dir, "--epochs", "2"}, []string{"--epochs", "--protocol ddranking"}},
		{"evaluate optimizer with ddranking", nil, []string{"evaluate", "--distilled", dir, "--protocol", "ddranking", "--optimizer", "sgd"}, []string{"--optimizer", "--protocol paper"}},
		{"evaluate checkpoint-every not a time", nil, []string{"evaluate", "--distilled", dir, "--protocol", "ddranking", "--checkpoint-every", "abc"}, []string{"--checkpoint-every", `"abc"`, "5m"}},
		{"evaluate ddranking epochs 0", nil, []string{"evaluate", "--distilled", dir, "--protocol", "ddranking", "--epochs", "0"}, []string{"--epochs", "0"}},
		{"data verify unknown", nil, []string{"data", "verify", "nope"}, []string{"nope"}},
		{"data fetch unknown", nil, []string{"data", "fetch", "nope", "--data-dir", empty}, []string{"nope"}},
		{"data verify missing", nil, []string{"data", "verify", "mnist", "--data-dir", empty}, []string{"mnist", "ldtorch data fetch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ldtorch(t, c.env, c.args...)
			msg := strings.TrimSuffix(r.stderr, "\n")
			if r.code != exitUsage {
				t.Fatalf("ldtorch %v: exit %d, want %d; stderr %q", c.args, r.code, exitUsage, r.stderr)
			}
			if msg == "" || strings.Contains(msg, "\n") {
				t.Errorf("ldtorch %v: want one line on stderr, got %q", c.args, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("ldtorch %v: message %q does not mention %q", c.args, msg, w)
				}
			}
			for _, bad := range []string{"panic", "goroutine", "Incorrect Usage"} {
				if strings.Contains(r.stderr+r.stdout, bad) {
					t.Errorf("ldtorch %v: output contains %q", c.args, bad)
				}
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "run.json")
	if err := os.WriteFile(cfgFile, []byte(`{"epochs": 7, "base_examples": 20, "data_dir": "from-config"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	resolved := func(env []string, args ...string) map[string]any {
		t.Helper()
		r := ldtorch(t, env, append([]string{"distill", "--dry-run"}, args...)...)
		if r.code != 0 {
			t.Fatalf("distill --dry-run %v: exit %d: %s", args, r.code, r.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("dry-run output: %v: %q", err, r.stdout)
		}
		return m
	}
	env := []string{"LDTORCH_EPOCHS=8"}
	for _, c := range []struct {
		env  []string
		args []string
		want float64
	}{
		{nil, nil, 400},                                          // default (auto)
		{nil, []string{"--config", cfgFile}, 7},                  // file over defaults
		{env, []string{"--config", cfgFile}, 8},                  // variable over file
		{env, []string{"--config", cfgFile, "--epochs", "9"}, 9}, // flag over variable
	} {
		if got := resolved(c.env, c.args...)["epochs"]; got != c.want {
			t.Errorf("env %v args %v: epochs %v, want %v", c.env, c.args, got, c.want)
		}
	}
	m := resolved(nil, "--config", cfgFile, "--inner-batch", "5", "--baselines", "none", "--model-betas", "0.5,0.6")
	if m["base_examples"] != 20.0 || m["inner_batch"] != 5.0 || m["data_dir"] != "from-config" {
		t.Errorf("resolved: %v", m)
	}
	if b, ok := m["baselines"].([]any); !ok || len(b) != 0 {
		t.Errorf("--baselines none: %v", m["baselines"])
	}
	if b := fmt.Sprint(m["model_betas"]); b != "[0.5 0.6]" {
		t.Errorf("--model-betas: %v", b)
	}
	// Without --data-dir or a data_dir key, data comes from where `ldtorch data` puts it.
	r := ldtorch(t, []string{"LDTORCH_DATA=/some/where"}, "distill", "--dry-run")
	if !strings.Contains(r.stdout, `"data_dir": "/some/where"`) {
		t.Errorf("default data_dir: %s", r.stdout)
	}
}

func TestDataCommands(t *testing.T) {
	shared := sharedDatasets(t)
	r := ldtorch(t, nil, "data", "list", "--data-dir", shared)
	if r.code != 0 {
		t.Fatalf("data list: exit %d: %s", r.code, r.stderr)
	}
	if !regexpMatch(`(?m)^mnist\s+present`, r.stdout) {
		t.Errorf("data list does not show mnist as present:\n%s", r.stdout)
	}
	r = ldtorch(t, nil, "data", "verify", "mnist", "--data-dir", shared)
	if r.code != 0 || strings.Count(r.stdout, " ok ") != 4 {
		t.Errorf("data verify mnist: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Link MNIST from the shared folder into a fresh data folder (flags after the name).
	dataDir := t.TempDir()
	r = ldtorch(t, nil, "data", "fetch", "mnist", "--from-shared", shared, "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, "mnist: ready") {
		t.Fatalf("data fetch --from-shared: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "mnist", "t10k-labels-idx1-ubyte.gz")); err != nil {
		t.Errorf("after fetch: %v", err)
	}
	// A corrupted copy fails verification with exit 2.
	bad := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bad, "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		b, err := os.ReadFile(filepath.Join(shared, "mnist", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "t10k-labels-idx1-ubyte.gz" { // change one label, keep a valid gzip file
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)-1] = (raw[len(raw)-1] + 1) % 10
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(raw)
			zw.Close()
			b = buf.Bytes()
		}
		if err := os.WriteFile(filepath.Join(bad, "mnist", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r = ldtorch(t, nil, "data", "verify", "--data-dir", bad)
	if r.code != exitUsage || !strings.Contains(r.stdout, "MISMATCH") || !strings.Contains(r.stderr, "mnist") ||
		!strings.Contains(r.stdout, "a valid IDX file ([10000]) but not the registered one") {
		t.Errorf("verify of a corrupted file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// What is wrong, when the content shows it (it used to say only MISMATCH).
	labels := filepath.Join(bad, "mnist", "t10k-labels-idx1-ubyte.gz")
	for _, c := range []struct {
		name   string
		edit   func(raw []byte) []byte // the decompressed content
		gzipIt bool
		want   string
	}{
		{"label out of range", func(raw []byte) []byte { raw[20] = 200; return raw }, true, "label 200 of item 12 is out of range (mnist has 10 classes)"},
		{"count against size", func(raw []byte) []byte { return raw[:len(raw)-10] }, true, "labels"},
		{"bad magic", func(raw []byte) []byte { raw[2] = 0x0d; return raw }, true, "element type 0x0d"},
		{"not gzip", func(raw []byte) []byte { return raw[:100] }, false, "t10k-labels"},
	} {
		orig, err := os.ReadFile(filepath.Join(shared, "mnist", "t10k-labels-idx1-ubyte.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(orig))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(zr)
		content := c.edit(raw)
		if c.gzipIt {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(content)
			zw.Close()
			content = buf.Bytes()
		}
		if err := os.WriteFile(labels, content, 0o644); err != nil {
			t.Fatal(err)
		}
		r = ldtorch(t, nil, "data", "verify", "mnist", "--data-dir", bad)
		if r.code != exitUsage || !strings.Contains(r.stdout, c.want) {
			t.Errorf("%s: exit %d, want %q in\n%s%s", c.name, r.code, c.want, r.stdout, r.stderr)
		}
	}
}

func TestDistillAndEvaluate(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "run")
	r := ldtorch(t, nil, "distill", "--data-dir", shared, "--dataset", "mnist", "--method", "rr",
		"--base", "20", "--inner-batch", "10", "--outer-batch", "256", "--target-set-size", "2000",
		"--epochs", "2", "--eval-models", "2", "--baselines", "true", "--baseline-max-steps", "50",
		"--reset-window", "10", "--out", out)
	if r.code != 0 {
		t.Fatalf("distill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"LD RR", "distilled (LD RR)", "true labels (RR)", "±", "wall time", out} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "epoch 2/2 step 16/16") {
		t.Errorf("progress lines lack the validation line:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "distilled.npz")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"method", "source", "target", "base_examples", "seed", "epochs", "steps",
		"test_accuracy_mean", "test_accuracy_std", "test_accuracies", "baselines", "wall_seconds",
		"libtorch_version", "data_sha256", "config"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	if rep["method"] != "rr" || rep["target"] != "mnist" || rep["base_examples"] != 20.0 || rep["epochs"] != 2.0 {
		t.Errorf("report.json: method %v target %v base_examples %v epochs %v", rep["method"], rep["target"], rep["base_examples"], rep["epochs"])
	}
	if accs, _ := rep["test_accuracies"].([]any); len(accs) != 2 {
		t.Errorf("test_accuracies: %v", rep["test_accuracies"])
	}
	if bl, _ := rep["baselines"].(map[string]any); bl["true_rr"] == nil {
		t.Errorf("baselines: %v", rep["baselines"])
	}

	r = ldtorch(t, nil, "evaluate", "--distilled", out, "--steps", "20", "--models", "2", "--json")
	if r.code != 0 {
		t.Fatalf("evaluate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var ev struct {
		Arch       string    `json:"arch"`
		Steps      int       `json:"steps"`
		RR         bool      `json:"rr"`
		Accuracies []float64 `json:"test_accuracies"`
		Mean       float64   `json:"test_accuracy_mean"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil {
		t.Fatalf("evaluate --json: %v: %q", err, r.stdout)
	}
	if ev.Arch != "lenet" || ev.Steps != 20 || !ev.RR || len(ev.Accuracies) != 2 || ev.Mean <= 0 || ev.Mean > 100 {
		t.Errorf("evaluate --json: %+v", ev)
	}
	// A mismatched architecture is a usage error, found before any training.
	r = ldtorch(t, nil, "evaluate", "--distilled", out, "--arch", "alexnet")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--arch") {
		t.Errorf("evaluate --arch alexnet on MNIST: exit %d: %s", r.code, r.stderr)
	}
}

func TestFindSharedDatasets(t *testing.T) {
	base := t.TempDir()
	shared := filepath.Join(base, "shared", "datasets")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(base, "repo", "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findSharedDatasets(deep); err != nil || got != shared {
		t.Fatalf("findSharedDatasets: %q %v", got, err)
	}
	// A folder without one finds only what lies above the temporary folder (a machine may
	// keep a shared/datasets in /tmp or higher), and nothing at all where nothing does.
	empty := filepath.Join(t.TempDir(), "x", "y")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	above := ""
	for d := filepath.Dir(filepath.Dir(empty)); ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "shared", "datasets")); err == nil && st.IsDir() {
			above = filepath.Join(d, "shared", "datasets")
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	got, err := findSharedDatasets(empty)
	switch {
	case above == "" && err == nil:
		t.Fatalf("found %q where there is no shared/datasets folder", got)
	case above != "" && got != above:
		t.Fatalf("findSharedDatasets(%s) = %q %v, want the folder above it, %s", empty, got, err, above)
	}
}
