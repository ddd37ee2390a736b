// Base examples given by index that a run cannot use as given: leaving classes out is
// accepted with a warning on screen and in report.json, and method dd, which uses no base
// examples, refuses them instead of recording a file it ignored.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
)

// givenIndices writes, from the base examples of a run of 100 balanced ones, the indices
// of the ten of class 3 to one file and two of each class to another, and returns them.
func givenIndices(t *testing.T, shared string) (threes, twenty string) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "hundred")
	if r := ldtorch(t, nil, tinyDistill(shared, run, "--base", "100", "--epochs", "1", "--target-set-size", "300", "--quiet")...); r.code != 0 {
		t.Fatalf("distill --base 100: exit %d: %s", r.code, r.stderr)
	}
	art, err := artifact.Read(run)
	if err != nil {
		t.Fatal(err)
	}
	var picked, two []string
	per := map[int64]int{}
	for i, c := range art.BaseClasses {
		if c == 3 {
			picked = append(picked, fmt.Sprint(art.BaseIndices[i]))
		}
		if per[c]++; per[c] <= 2 {
			two = append(two, fmt.Sprint(art.BaseIndices[i]))
		}
	}
	if len(picked) != 10 || len(two) != 20 {
		t.Fatalf("%d base examples of class 3 and %d two of each, want 10 and 20", len(picked), len(two))
	}
	threes, twenty = filepath.Join(t.TempDir(), "threes.txt"), filepath.Join(t.TempDir(), "twenty.txt")
	for _, f := range []struct {
		path string
		list []string
	}{{threes, picked}, {twenty, two}} {
		if err := os.WriteFile(f.path, []byte(strings.Join(f.list, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return threes, twenty
}

func TestGivenBaseExamplesThatCannotServe(t *testing.T) {
	shared := sharedDatasets(t)
	idx, twenty := givenIndices(t, shared)

	out := filepath.Join(t.TempDir(), "threes")
	r := ldtorch(t, nil, tinyDistill(shared, out, "--base-indices", idx, "--base", "10", "--inner-batch", "5", "--quiet")...)
	const warning = "the 10 base examples given in base_indices hold 1 of mnist's 10 classes (examples per class 3: 10); none of class 0, 1, 2, 4, 5, 6, 7, 8, 9"
	if r.code != 0 || !strings.Contains(r.stderr, "warning: "+warning) {
		t.Errorf("ten base examples of one class: exit %d, stderr %q, want the warning %q", r.code, r.stderr, warning)
	}
	if ws := anyStrings(readReport(t, out)["data_warnings"]); !strings.Contains(strings.Join(ws, "\n"), warning) {
		t.Errorf("report.json data_warnings %q, want the warning", ws)
	}

	dd := filepath.Join(t.TempDir(), "dd")
	wantOneLine(t, ldtorch(t, nil, tinyImages(shared, dd, "dd", "--base-indices", twenty, "--dry-run")...),
		exitUsage, "--base-indices: does not apply to method dd", "use no base examples")
	wantOneLine(t, ldtorch(t, nil, tinyImages(shared, dd, "dd", "--base-indices", twenty)...),
		exitUsage, "--base-indices: does not apply to method dd")
	noFile(t, dd)
}

// An artifact's distilled.npz given as --base-indices carries the data of its run (its
// report.json beside it): another dataset or base seed is refused naming the flag, as a
// select-base file's header is, and an index outside the target-set part is a usage error
// of --base-indices.
func TestArtifactAsBaseIndicesOfOtherData(t *testing.T) {
	shared := sharedDatasets(t)
	art := filepath.Join(tinyRun(t), "distilled.npz") // mnist, 20 base examples, base seed 1234
	dir := t.TempDir()
	wantOneLine(t, ldtorch(t, nil, tinyDistill(shared, filepath.Join(dir, "kmnist"), "--dataset", "kmnist", "--base-indices", art, "--quiet")...),
		exitUsage, "--dataset: "+art+" holds the base examples of a run from mnist, the run's base examples come from kmnist")
	wantOneLine(t, ldtorch(t, nil, tinyDistill(shared, filepath.Join(dir, "seed"), "--base-seed", "7", "--base-indices", art, "--quiet")...),
		exitUsage, "--base-seed: "+art+" holds the base examples of a run under base seed 1234", "the run's is 7")
	for _, name := range []string{"kmnist", "seed"} {
		noFile(t, filepath.Join(dir, name, "report.json"))
	}

	// The same file with its run's data serves.
	same := filepath.Join(dir, "same")
	if r := ldtorch(t, nil, tinyDistill(shared, same, "--base-indices", art, "--epochs", "1", "--quiet")...); r.code != 0 {
		t.Fatalf("its own run's data: exit %d: %s", r.code, r.stderr)
	}
	if o, _ := readReport(t, same)["base_origin"].(map[string]any); o["file"] != art || o["selection"] != "given" {
		t.Errorf("base_origin %v, want the file %s, given", o, art)
	}

	// Positions past the train file, or in the validation part: the flag's error.
	list := filepath.Join(dir, "far.txt")
	far := make([]string, 20)
	for i := range far {
		far[i] = fmt.Sprint(60000 + i)
	}
	if err := os.WriteFile(list, []byte(strings.Join(far, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOneLine(t, ldtorch(t, nil, tinyDistill(shared, filepath.Join(dir, "far"), "--base-indices", list, "--quiet")...),
		exitUsage, "--base-indices: ", "base index 60000 (entry 0) is not in the target-set part of the train split")
}
