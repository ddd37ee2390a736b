package main

// savemodels_test.go: --save-models of evaluate and distill.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveModelsFlags(t *testing.T) {
	shared := sharedDatasets(t)
	art := smallArtifact(t)
	models := filepath.Join(t.TempDir(), "models")
	r := ldtorch(t, nil, "evaluate", "--distilled", art, "--data-dir", shared, "--steps", "5", "--models", "2", "--save-models", models)
	if r.code != 0 || !strings.Contains(r.stdout, "models saved in "+models) {
		t.Fatalf("evaluate --save-models: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"model-0.pt", "model-1.pt", "models.json"} {
		if _, err := os.Stat(filepath.Join(models, f)); err != nil {
			t.Fatal(err)
		}
	}
	// A folder of saved models is refused, by evaluate and by distill before any work.
	r = ldtorch(t, nil, "evaluate", "--distilled", art, "--data-dir", shared, "--steps", "5", "--models", "1", "--save-models", models)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--save-models "+models) || !strings.Contains(r.stderr, "already holds saved models") {
		t.Errorf("evaluate into a folder of saved models: exit %d: %s", r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "run")
	r = ldtorch(t, nil, "distill", "--data-dir", shared, "--base", "20", "--out", out, "--save-models", models)
	if r.code != exitUsage || !strings.Contains(r.stderr, "already holds saved models") || strings.Contains(r.stderr, "distilling") {
		t.Errorf("distill into a folder of saved models: exit %d: %s", r.code, r.stderr)
	}
	r = ldtorch(t, nil, "evaluate", "--distilled", art, "--save-models", "")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--save-models needs a folder") {
		t.Errorf("evaluate --save-models '': exit %d: %s", r.code, r.stderr)
	}
}
