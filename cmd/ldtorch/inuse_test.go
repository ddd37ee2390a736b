// A folder whose run is still going, given to a command that reads artifacts: the command
// says a run is writing into it and that its artifact comes when the run ends, naming the
// process; a folder without an artifact and without a run keeps the reader's own words.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func TestReadersOfAFolderInUse(t *testing.T) {
	shared := sharedDatasets(t)
	dir := filepath.Join(t.TempDir(), "going")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	readers := []struct {
		args []string
		flag string
		idle string // what is said when no run holds the folder
	}{
		{[]string{"evaluate", "--distilled", dir, "--models", "1", "--data-dir", shared}, "--distilled: ", "has no distilled.npz (is it the output folder of ldtorch distill?)"},
		{[]string{"study", "lr", "--distilled", dir, "--models", "1", "--data-dir", shared}, "--distilled: ", "has no distilled.npz (is it the output folder of ldtorch distill?)"},
		{[]string{"report", dir, "--data-dir", shared}, "", "holds no distilled.npz (not the --out folder of a finished distill run)"},
		{[]string{"gradvar", dir, "--data-dir", shared}, "", "holds no distilled.npz"},
		{[]string{"export", dir}, "", "holds no distilled.npz"},
	}
	for _, r := range readers {
		res := ldtorch(t, nil, r.args...)
		wantOneLine(t, res, exitUsage, r.flag+dir+" "+r.idle)
	}

	unlock, err := atomicfile.LockDir(dir) // as the run writing into it holds it
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	holder := fmt.Sprintf("ldtorch process %d holds %s", os.Getpid(), filepath.Join(dir, lockFile))
	for _, r := range readers {
		res := ldtorch(t, nil, r.args...)
		wantOneLine(t, res, exitUsage, r.flag+dir+" has no distilled.npz yet: a run is writing into it", holder, "its artifact is written when the run ends")
		if strings.Contains(res.stderr, "is it the output folder") || strings.Contains(res.stderr, "finished distill run") {
			t.Errorf("%v: %s", r.args, res.stderr)
		}
	}
}
