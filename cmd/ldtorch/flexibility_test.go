// study flexibility beside studies it did not run: a study of another artifact copied into
// the folder is not taken for this one's, a study of the user's own grid is reused and said
// to be one, and a study it cannot reuse (another model count) is kept as it is while its
// own goes beside it.

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlexibilityKeepsOtherStudies(t *testing.T) {
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	ld, other, dd := filepath.Join(tmp, "ld"), filepath.Join(tmp, "other"), filepath.Join(tmp, "dd")
	for _, args := range [][]string{tinyDistill(shared, ld, "--quiet"), tinyDistill(shared, other, "--quiet", "--seed", "2"), tinyImages(shared, dd, "dd", "--quiet")} {
		if r := ldtorch(t, nil, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	run := func(models string, args ...string) result {
		t.Helper()
		r := ldtorch(t, nil, append(args, "--data-dir", shared, "--models", models, "--threads", "1", "--quiet")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	// Another artifact's steps study, copied in; an arch study of one architecture; dd's
	// steps study with two models per setting.
	run("1", "study", "steps", "--distilled", other)
	copied := mustReadFile(t, filepath.Join(other, "studies", "steps.json"))
	os.MkdirAll(filepath.Join(ld, "studies"), 0o755)
	if err := os.WriteFile(filepath.Join(ld, "studies", "steps.json"), copied, 0o644); err != nil {
		t.Fatal(err)
	}
	run("1", "study", "arch", "--distilled", ld, "--archs", "lenet")
	run("2", "study", "steps", "--distilled", dd)
	ddSteps := mustReadFile(t, filepath.Join(dd, "studies", "steps.json"))

	r := run("1", "study", "flexibility", "--distilled", ld, "--versus", dd)
	for _, want := range []string{
		"note: ran steps study of " + ld + " into " + filepath.Join(ld, "studies", "flexibility", "steps.json") + " (" + filepath.Join(ld, "studies", "steps.json") + " not reused: it scored another distilled.npz",
		"note: reused " + filepath.Join(ld, "studies", "arch.json") + " (1 models per setting, seed 1234; its settings (lenet (distilled labels), lenet (true labels)) are not the arch study's",
		"note: ran steps study of " + dd + " into " + filepath.Join(dd, "studies", "flexibility", "steps.json") + " (" + filepath.Join(dd, "studies", "steps.json") + " not reused: it trained 2 models per setting, not 1",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("flexibility does not say %q:\n%s", want, r.stdout)
		}
	}
	if got := mustReadFile(t, filepath.Join(ld, "studies", "steps.json")); !bytes.Equal(got, copied) {
		t.Errorf("flexibility overwrote %s", filepath.Join(ld, "studies", "steps.json"))
	}
	if got := mustReadFile(t, filepath.Join(dd, "studies", "steps.json")); !bytes.Equal(got, ddSteps) {
		t.Errorf("flexibility overwrote %s (two models per setting)", filepath.Join(dd, "studies", "steps.json"))
	}
	// Again: every study reused, its own where it ran them.
	r = run("1", "study", "flexibility", "--distilled", ld, "--versus", dd)
	if n := strings.Count(r.stdout, "note: reused "); n != 7 || !strings.Contains(r.stdout, "note: reused "+filepath.Join(dd, "studies", "flexibility", "steps.json")) {
		t.Errorf("second flexibility: %d studies reused, want 7 (dd's steps from studies/flexibility):\n%s", n, r.stdout)
	}
}
