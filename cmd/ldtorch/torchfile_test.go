// Files of an artifact put in place of another kind of file: a named pipe as distilled.pt is
// refused unopened by every command that reads an artifact (opening it would wait for a
// writer, through signals), and a folder is named as distilled.pt, not distilled.npz, by
// each of them; a file given for the artifact's folder, and another ldtorch file as
// distilled.npz, are named as what they are.

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// runReleasing runs the CLI in-process for at most limit; a call still going then (blocked
// in the open of the named pipe fifo) is released by a writer opening the pipe, and the
// test fails.
func runReleasing(t *testing.T, limit time.Duration, fifo string, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := runContext(context.Background(), append([]string{"ldtorch"}, args...), &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
	}
	t.Errorf("ldtorch %v: still running after %v (blocked on the named pipe %s)", args, limit, fifo)
	for {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case r := <-done:
			return r
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestDistilledPtNotAFile(t *testing.T) {
	shared := sharedDatasets(t)
	fifoRun := copyTree(t, tinyRun(t))
	fifo := filepath.Join(fifoRun, "distilled.pt")
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"evaluate", "--distilled", fifoRun, "--models", "1", "--data-dir", shared, "--threads", "1"}, exitUsage},
		{[]string{"evaluate", "--distilled", fifoRun, "--protocol", "ddranking", "--models", "1", "--data-dir", shared, "--threads", "1"}, exitUsage},
		{[]string{"study", "steps", "--distilled", fifoRun, "--models", "1", "--deltas", "0", "--data-dir", shared, "--threads", "1"}, exitUsage},
		{[]string{"report", fifoRun, "--data-dir", shared}, exitFailure},
		{[]string{"export", fifoRun}, exitFailure},
	} {
		start := time.Now()
		r := runReleasing(t, 20*time.Second, fifo, tc.args...)
		wantOneLine(t, r, tc.code, fifo, "a named pipe, not a regular file")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: took %v", tc.args, d)
		}
	}

	dirRun := copyTree(t, tinyRun(t))
	pt := filepath.Join(dirRun, "distilled.pt")
	os.Remove(pt)
	if err := os.Mkdir(pt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		subs []string
	}{
		{[]string{"evaluate", "--distilled", dirRun, "--models", "1", "--data-dir", shared, "--threads", "1"}, exitUsage, []string{"--distilled"}},
		{[]string{"evaluate", "--distilled", dirRun, "--protocol", "ddranking", "--models", "1", "--data-dir", shared, "--threads", "1"}, exitUsage, []string{"--distilled"}},
		{[]string{"study", "steps", "--distilled", dirRun, "--models", "1", "--deltas", "0", "--data-dir", shared, "--threads", "1"}, exitUsage, []string{"--distilled"}},
		{[]string{"report", dirRun, "--data-dir", shared}, exitFailure, nil},
		{[]string{"export", dirRun}, exitFailure, nil},
		{[]string{"gradvar", dirRun, "--data-dir", shared}, exitUsage, nil},
	} {
		r := ldtorch(t, nil, tc.args...)
		wantOneLine(t, r, tc.code, append(tc.subs, pt, "is a folder")...)
		if bytes.Contains([]byte(r.stderr), []byte("distilled.npz")) {
			t.Errorf("%v: a folder as distilled.pt named as distilled.npz: %s", tc.args, r.stderr)
		}
	}
}

// A file given where an artifact's folder belongs (its distilled.npz, its report.json, an
// index file) is named as a file, with the folder to give where it is one of the artifact's.
func TestArtifactFileForItsFolder(t *testing.T) {
	shared := sharedDatasets(t)
	run := tinyRun(t)
	npzFile, rep := filepath.Join(run, "distilled.npz"), filepath.Join(run, "report.json")
	other := filepath.Join(t.TempDir(), "indices.txt")
	if err := os.WriteFile(other, []byte("1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		subs []string
	}{
		{[]string{"evaluate", "--distilled", npzFile, "--models", "1"}, []string{"--distilled: " + npzFile + " is a file, not an artifact's folder", "give the folder that holds it, " + run}},
		{[]string{"evaluate", "--distilled", rep, "--protocol", "ddranking", "--models", "1"}, []string{"--distilled: " + rep + " is a file", "give the folder that holds it, " + run}},
		{[]string{"study", "steps", "--distilled", other, "--models", "1", "--deltas", "0"}, []string{"--distilled: " + other + " is a file, not an artifact's folder"}},
		{[]string{"study", "flexibility", "--distilled", run, "--versus", npzFile, "--models", "1"}, []string{"--versus: " + npzFile + " is a file", "give the folder that holds it, " + run}},
	} {
		r := ldtorch(t, nil, append(tc.args, "--data-dir", shared, "--threads", "1")...)
		wantOneLine(t, r, exitUsage, tc.subs...)
		if bytes.Contains([]byte(r.stderr), []byte("not a directory")) {
			t.Errorf("%v: %s", tc.args, r.stderr)
		}
	}
}

// Another kind of ldtorch file put in place of distilled.npz (a run's checkpoint, a
// select-base index file) is named as what it is by every reader, in a short line.
func TestOtherFileAsDistilledNpz(t *testing.T) {
	shared := sharedDatasets(t)
	src := tinyRun(t)
	ckpts, err := filepath.Glob(filepath.Join(src, "checkpoints", "ckpt-*.npz"))
	if err != nil || len(ckpts) == 0 {
		t.Fatalf("no checkpoint in %s (%v)", src, err)
	}
	index := []byte(data.BaseFileMarker + `{"strategy":"random","dataset":"mnist","base_examples":2,"base_seed":1234,"validation_size":10000}` + "\n1\n2\n")
	for _, tc := range []struct {
		name string
		put  func(path string) error
		want string
	}{
		{"checkpoint", func(path string) error { return os.WriteFile(path, mustReadFile(t, ckpts[0]), 0o644) }, "a checkpoint of a run (its state between meta-steps), not an artifact's arrays: ldtorch distill --resume"},
		{"index file", func(path string) error { return os.WriteFile(path, index, 0o644) }, "an index file of ldtorch select-base, not an artifact's arrays"},
	} {
		run := copyTree(t, src)
		npzPath := filepath.Join(run, "distilled.npz")
		if err := tc.put(npzPath); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"evaluate", "--distilled", run, "--models", "1", "--data-dir", shared, "--threads", "1"},
			{"report", run, "--data-dir", shared},
			{"export", run},
		} {
			r := ldtorch(t, nil, args...)
			if r.code == 0 || !strings.Contains(r.stderr, npzPath+": "+tc.want) || len(r.stderr) > 400 {
				t.Errorf("%s as distilled.npz, %v: exit %d, stderr %q, want %q in a short line", tc.name, args, r.code, r.stderr, tc.want)
			}
		}
	}
}
