// What was made from an artifact (its report, figures, studies, evaluations, gradient
// variance) does not outlive the artifact: a run that replaces it with another removes
// them, one that writes the same artifact again keeps them.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplacedArtifactTakesItsResults(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	if r := ldtorch(t, nil, tinyDistill(shared, out, "--quiet", "--report")...); r.code != 0 {
		t.Fatalf("distill --report: exit %d: %s", r.code, r.stderr)
	}
	if r := ldtorch(t, nil, "study", "steps", "--distilled", out, "--data-dir", shared, "--models", "1", "--deltas", "0", "--threads", "1", "--quiet"); r.code != 0 {
		t.Fatalf("study steps: exit %d: %s", r.code, r.stderr)
	}
	for _, f := range []string{"evaluations/ddranking.json", "gradvar.json"} {
		os.MkdirAll(filepath.Dir(filepath.Join(out, f)), 0o755)
		if err := os.WriteFile(filepath.Join(out, f), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	made := []string{"report.html", "figures", "studies/steps.json", "evaluations/ddranking.json", "gradvar.json"}
	for _, f := range made {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("before: %v", err)
		}
	}

	// The finished run resumed: the same artifact, its results kept.
	if r := ldtorch(t, nil, "distill", "--resume", out, "--data-dir", shared, "--threads", "1", "--quiet"); r.code != 0 {
		t.Fatalf("distill --resume: exit %d: %s", r.code, r.stderr)
	} else if strings.Contains(r.stdout, "removed") {
		t.Errorf("the same artifact written again removed its results: %s", r.stdout)
	}
	for _, f := range made {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("after a resume that wrote the same artifact: %v", err)
		}
	}

	// --overwrite with another seed: another artifact; what was made from the old one goes.
	r := ldtorch(t, nil, tinyDistill(shared, out, "--quiet", "--overwrite", "--seed", "2")...)
	if r.code != 0 {
		t.Fatalf("distill --overwrite: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "removed what was made from the artifact this run replaced: report.html, figures, studies, evaluations, gradvar.json") {
		t.Errorf("--overwrite does not say what it removed:\n%s", r.stdout)
	}
	for _, f := range made {
		noFile(t, filepath.Join(out, f))
	}
	if readReport(t, out)["seed"] != 2.0 {
		t.Errorf("report.json is not the new run's")
	}
}
