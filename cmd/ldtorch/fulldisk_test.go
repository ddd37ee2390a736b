// A disk that fills while distill writes its artifact: no file of the artifact is replaced
// (the three are written in full before any is renamed), the checkpoint and the finished
// final test are kept, the message names the cause and the resume, and the resume, once
// there is space, writes the artifact an uninterrupted run writes without training again.

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestArtifactOnAFullDisk(t *testing.T) {
	shared := sharedDatasets(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small file system")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare for a mount namespace")
	}
	if err := exec.Command(unshare, "-m", "true").Run(); err != nil {
		t.Skipf("no mount namespace: %v", err)
	}
	// Room for what the run writes before its artifact (tinyRun's own files, the same run)
	// and distilled.npz, two pages to spare: not for distilled.pt.
	ref := tinyRun(t)
	pages := int64(2)
	err = filepath.WalkDir(ref, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if name := d.Name(); name == "distilled.pt" || name == "report.json" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		pages += (info.Size() + 4095) / 4096
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	out := filepath.Join(mnt, "out")
	script := `mnt=$1 size=$2 ref=$3 bin=$4; shift 4
mount -t tmpfs -o size="$size" tmpfs "$mnt" || exit 97
"$bin" "$@"; echo "first exit $?"
echo "left: $(ls -A "$mnt/out" | tr '\n' ' ')"
mount -o remount,size=64m "$mnt" || exit 98
"$bin" distill --resume "$mnt/out" --data-dir "$DATA" --threads 1 2>&1; echo "resume exit $?"
cmp -s "$mnt/out/distilled.npz" "$ref/distilled.npz" && echo "same artifact"`
	args := tinyDistill(shared, out, "--quiet")
	cmd := binaryCommand(t, []string{"DATA=" + shared}, args...)
	cmd.Args = append([]string{unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", mnt, strconv.FormatInt(pages*4096, 10), ref, cmd.Path}, args...)
	cmd.Path = unshare
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running after 3 minutes\n%s%s", stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	so, se := stdout.String(), stderr.String()
	if !strings.Contains(so, "first exit 1") {
		t.Fatalf("the run on the full disk did not fail with exit 1:\n%s%s", so, se)
	}
	for _, want := range []string{"no space left on device", "no file of the artifact was replaced",
		"the run's last checkpoint and its finished final test and baselines are kept in " + filepath.Join(out, "checkpoints"),
		"continue with: ldtorch distill --resume " + out} {
		if !strings.Contains(se, want) {
			t.Errorf("the failure does not say %q:\n%s", want, se)
		}
	}
	if n := strings.Count(strings.TrimSpace(se), "\n"); n != 0 {
		t.Errorf("want one line on stderr, got %d:\n%s", n+1, se)
	}
	if !strings.Contains(so, "left: .ldtorch.lock checkpoints metrics.jsonl \n") {
		t.Errorf("the folder after the failure, want no file of the artifact:\n%s", so)
	}
	for _, want := range []string{"final test: the 1 test models' accuracies are those finished before the resume (phases.json)", "resume exit 0", "same artifact"} {
		if !strings.Contains(so, want) {
			t.Errorf("the resume with space does not give %q:\n%s", want, so)
		}
	}
}
