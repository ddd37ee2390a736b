// The commands on artifacts of learnt images: a tiny method dd run and a learn images run
// on MNIST, then evaluate (dd's own recipe, and the standard one when asked), report (the
// learnt-image grid), study, and the refusals of what needs labels for real images
// (gradvar, --base-indices of a dd artifact); SIGINT during a dd run checkpoints and exits
// 130.

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tinyImages is tinyDistill learning images: method dd (2 steps × 2 epochs over 20
// images), or learn images.
func tinyImages(shared, out, kind string, extra ...string) []string {
	args := tinyDistill(shared, out, "--method", "ld", "--learn", "images")
	if kind == "dd" { // without tinyDistill's --inner-batch and --reset-window, which dd has not
		args = []string{"distill", "--data-dir", shared, "--dataset", "mnist", "--method", "dd", "--dd-steps", "2", "--dd-epochs", "2",
			"--base", "20", "--outer-batch", "256", "--target-set-size", "2000", "--epochs", "2", "--eval-models", "1",
			"--baselines", "none", "--threads", "1", "--out", out}
	}
	return append(args, extra...)
}

func TestImageArtifactCommands(t *testing.T) {
	shared := sharedDatasets(t)
	dd := filepath.Join(t.TempDir(), "dd")
	if r := ldtorch(t, nil, tinyImages(shared, dd, "dd", "--quiet")...); r.code != 0 {
		t.Fatalf("distill --method dd: exit %d: %s%s", r.code, r.stdout, r.stderr)
	} else if !strings.Contains(r.stdout, "distilled (DD)") {
		t.Errorf("summary does not name DD:\n%s", r.stdout)
	}
	var rep map[string]any
	b, err := os.ReadFile(filepath.Join(dd, "report.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || rep["steps"] != 4.0 || strings.Join(anyStrings(rep["learnt"]), ",") != "images,step_lrs" {
		t.Fatalf("report.json: steps %v, learnt %v (%v)", rep["steps"], rep["learnt"], err)
	}

	// evaluate: dd's recipe by default, the standard one when a setting of it is given.
	r := ldtorch(t, nil, "evaluate", "--distilled", dd, "--data-dir", shared, "--models", "2", "--threads", "1", "--json", "--quiet")
	var ev map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ev) != nil || ev["recipe"] != "dd" || ev["steps"] != 4.0 {
		t.Fatalf("evaluate: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	r = ldtorch(t, nil, "evaluate", "--distilled", dd, "--data-dir", shared, "--models", "2", "--steps", "20", "--threads", "1", "--json", "--quiet")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ev) != nil || ev["recipe"] != "standard" || ev["steps"] != 20.0 || ev["optimizer"] != "adam" {
		t.Fatalf("evaluate --steps 20: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	wantOneLine(t, ldtorch(t, nil, "evaluate", "--distilled", dd, "--data-dir", shared, "--recipe", "dd", "--lr", "0.1"),
		exitUsage, "--recipe", "step sizes")

	// study: optimizer runs on the images with the standard recipe, saying so (steps, lr,
	// order and arch train with dd's own: ddstudy_test.go).
	r = ldtorch(t, nil, "study", "optimizer", "--distilled", dd, "--data-dir", shared, "--models", "1", "--optimizers", "adam", "--lr", "0.001", "--threads", "1", "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "method dd artifact") || !strings.Contains(r.stdout, "standard recipe") {
		t.Errorf("study optimizer: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}

	// Settings method dd would ignore are refused, naming what gave them.
	noDD := filepath.Join(t.TempDir(), "no-dd")
	wantOneLine(t, ldtorch(t, nil, tinyImages(shared, noDD, "dd", "--label-lr", "0.1")...),
		exitUsage, "--label-lr does not apply to method dd", "no online model, labels")
	wantOneLine(t, ldtorch(t, []string{"LDTORCH_INNER_BATCH=5"}, tinyImages(shared, noDD, "dd")...),
		exitUsage, "LDTORCH_INNER_BATCH does not apply to method dd without baselines")
	if _, err := os.Stat(noDD); err == nil {
		t.Errorf("a refused dd run created %s", noDD)
	}

	// Commands that need labels for real images refuse it.
	wantOneLine(t, ldtorch(t, nil, "gradvar", dd, "--data-dir", shared, "--models", "2", "--batches", "1"),
		exitUsage, dd, "learnt images", "real base images")
	wantOneLine(t, ldtorch(t, nil, tinyDistill(shared, filepath.Join(t.TempDir(), "x"), "--base-indices", filepath.Join(dd, "distilled.npz"))...),
		exitUsage, "base_indices", "no real base examples")

	// report: the learnt images per class beside real ones.
	images := filepath.Join(t.TempDir(), "images")
	if r := ldtorch(t, nil, tinyImages(shared, images, "images", "--quiet")...); r.code != 0 || !strings.Contains(r.stdout, "distilled (Our DD)") {
		t.Fatalf("distill --learn images: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	// Images and labels learnt together have no class of their own: the report groups them
	// by their labels' arg-max and draws no label distribution per original class.
	both := filepath.Join(t.TempDir(), "both")
	if r := ldtorch(t, nil, tinyDistill(shared, both, "--method", "ld", "--learn", "both", "--quiet")...); r.code != 0 {
		t.Fatalf("distill --learn both: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, dir := range []string{dd, images, both} {
		r := ldtorch(t, nil, "report", dir, "--data-dir", shared)
		if r.code != 0 {
			t.Fatalf("report %s: exit %d: %s", dir, r.code, r.stderr)
		}
		png := filepath.Join(dir, "figures", "learnt_images.png")
		if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
			t.Errorf("report %s: no learnt-image grid (%v)", dir, err)
		}
		noFile(t, filepath.Join(dir, "figures", "reconstructions.png"))
		if dir == both {
			noFile(t, filepath.Join(dir, "figures", "label_distribution.png"))
			if !strings.Contains(r.stdout+r.stderr, "no original class") {
				t.Errorf("report of images and labels learnt together: %s%s", r.stdout, r.stderr)
			}
		}
	}
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}

// TestSIGINTDuringDD: SIGINT during method dd's meta-loop checkpoints and exits 130; the
// run resumes from it.
func TestSIGINTDuringDD(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	r := startBinary(t, tinyImages(shared, out, "dd", "--epochs", "1000", "--validate-every", "1")...)
	r.waitFor(t, "epoch 1/1000", 2*time.Minute)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("after SIGINT: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
	}
	if m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz")); len(m) == 0 {
		t.Fatalf("no checkpoint after SIGINT:\n%s", r.log.String())
	}
	noFile(t, filepath.Join(out, "distilled.npz"))
	res := ldtorch(t, nil, "distill", "--resume", out, "--dry-run")
	if res.code != 0 || !strings.Contains(res.stdout, `"method": "dd"`) {
		t.Errorf("--resume %s --dry-run: exit %d: %s%s", out, res.code, res.stdout, res.stderr)
	}
}
