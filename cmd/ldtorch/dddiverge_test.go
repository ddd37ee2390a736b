// Method dd diverging, end to end: settings that make its run diverge, and an artifact
// whose learnt step sizes make fresh models diverge. Each ends with one line naming what
// is at fault, and writes nothing.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// rewriteArtifact rewrites dir's distilled.npz with edit applied to its members and makes
// report.json name the new file (its distilled.pt removed): an artifact as a run that
// learnt those values would have written it.
func rewriteArtifact(t *testing.T, dir string, edit func(map[string]*npz.Array)) {
	t.Helper()
	path := filepath.Join(dir, "distilled.npz")
	arc, err := npz.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]*npz.Array{}
	var order []*npz.Array
	for _, name := range arc.Names() {
		members[name] = arc.Get(name)
		order = append(order, members[name])
	}
	edit(members)
	if err := npz.WriteFile(path, order); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(mustReadFile(t, path))
	rep := readReport(t, dir)
	d := rep["distilled"].(map[string]any)
	d["sha256"] = hex.EncodeToString(sum[:])
	delete(d, "pt_sha256")
	os.Remove(filepath.Join(dir, "distilled.pt"))
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDDDivergenceNamesItsSetting: a method dd run made to diverge by its own settings
// names the flag (it said "non-finite label loss … no learning rate or scale is far from
// its default": there are no labels); an artifact whose learnt step sizes make fresh models
// diverge says so (it said "--lr 0 is too large", and no --lr was given).
func TestDDDivergenceNamesItsSetting(t *testing.T) {
	shared := sharedDatasets(t)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--dd-step-lr-init", "1e30"}, "most likely --dd-step-lr-init 1e+30 is too large (default 0.02)"},
		{nil, []string{"--dd-lr", "1e30"}, "most likely --dd-lr 1e+30 is too large (default 0.01)"},
		{[]string{"LDTORCH_DD_LR=1e30"}, nil, "most likely LDTORCH_DD_LR 1e+30 is too large"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		r := hostileRunEnv(t, 2*time.Minute, tc.env, tinyImages(shared, out, "dd", append(tc.args, "--quiet")...)...)
		wantOneLine(t, r, exitFailure, tc.want)
		if strings.Contains(r.stderr, "label") {
			t.Errorf("a dd run's divergence speaks of labels: %s", r.stderr)
		}
		noArtifact(t, out)
	}

	dd := filepath.Join(t.TempDir(), "dd")
	if r := ldtorch(t, nil, tinyImages(shared, dd, "dd", "--quiet")...); r.code != 0 {
		t.Fatalf("distill --method dd: exit %d: %s", r.code, r.stderr)
	}
	rewriteArtifact(t, dd, func(m map[string]*npz.Array) {
		lrs := m["step_lrs"].Data.([]float32)
		for i := range lrs {
			lrs[i] = 1e20
		}
	})
	r := ldtorch(t, nil, "evaluate", "--distilled", dd, "--data-dir", shared, "--models", "2", "--threads", "1", "--quiet")
	wantOneLine(t, r, exitFailure, "evaluate: all 2 evaluation model(s) diverged", "learnt step sizes", "the largest 1e+20")
	if strings.Contains(r.stderr, "--lr") && !strings.Contains(r.stderr, "the standard recipe") {
		t.Errorf("names --lr, which was not given: %s", r.stderr)
	}
	if strings.Contains(r.stderr, "--lr 0") {
		t.Errorf("names --lr 0: %s", r.stderr)
	}
}
