// The DD-Ranking protocol's full-data cache when it cannot be written (a shared or
// read-only folder): an entry it holds is read, a missing one is trained without being
// kept, and the folder is left as it was.

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readOnlyRun runs the built binary with args where dir cannot be written: as a user, the
// folder's permissions say so; root writes through them, so for root dir is mounted
// read-only in a mount namespace of the command's own (skipped where that is not allowed).
func readOnlyRun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := binaryCommand(t, nil, args...)
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
	} else {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("root, and no unshare to mount a folder read-only")
		}
		if err := exec.Command(unshare, "-m", "true").Run(); err != nil {
			t.Skipf("root, and no mount namespace: %v", err)
		}
		script := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"`
		cmd.Args = append([]string{unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", dir, cmd.Path}, args...)
		cmd.Path = unshare
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v: still running after 3 minutes\n%s", args, stderr.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func TestDDRankingReadOnlyCache(t *testing.T) {
	shared := sharedDatasets(t)
	out := tinyRRArtifact(t, shared)
	cache := filepath.Join(t.TempDir(), "cache")
	args := func(epochs string) []string {
		return []string{"evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "lenet", "--epochs", epochs,
			"--models", "1", "--cache-dir", cache, "--data-dir", shared, "--threads", "1", "--quiet", "--json"}
	}
	fullData := func(r result) map[string]any {
		t.Helper()
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("--json: %v: %q", err, r.stdout)
		}
		return res["full_data"].(map[string]any)
	}
	r := ldtorch(t, nil, args("1")...)
	if r.code != 0 {
		t.Fatalf("evaluate --protocol ddranking: exit %d\n%s", r.code, r.stderr)
	}
	want := fullData(r)["test_accuracy"]
	before := snapshot(t, cache)

	// The entry it needs is there: read.
	r = readOnlyRun(t, cache, args("1")...)
	if r.code != 0 {
		t.Fatalf("a read-only cache holding the model: exit %d\n%s", r.code, r.stderr)
	}
	if full := fullData(r); full["cached"] != true || full["test_accuracy"] != want {
		t.Errorf("a read-only cache holding the model: full data %v, want the cached %v", full, want)
	}
	// Another recipe: trained, not kept, and said so.
	r = readOnlyRun(t, cache, args("2")...)
	if r.code != 0 {
		t.Fatalf("a read-only cache without the model: exit %d\n%s", r.code, r.stderr)
	}
	if full := fullData(r); full["cached"] == true {
		t.Errorf("a model of another recipe taken from the cache: %v", full)
	}
	if !strings.Contains(r.stderr, "warning: the full-data cache "+cache+" cannot be written") {
		t.Errorf("no warning that the model is not kept:\n%s", r.stderr)
	}
	sameFiles(t, cache, before)
}
