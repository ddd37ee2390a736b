package engine

// repro_test.go: the reproduction controls on real data: base_seed, base_indices and a
// target-set size that leaves the base examples alone.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

func sharedDataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(filepath.Join(dir, "mnist")); err != nil {
		t.Skipf("shared datasets not found at %s", dir)
	}
	return dir
}

func loadForTest(t *testing.T, mutate func(*config.Config)) *Data {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = sharedDataDir(t)
	mutate(&cfg)
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := LoadData(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestTargetSetSizeKeepsBaseExamples(t *testing.T) {
	for _, src := range []string{"mnist", "kmnist"} { // within and across datasets
		full := loadForTest(t, func(c *config.Config) { c.Source = src; c.Seed = 77 })
		small := loadForTest(t, func(c *config.Config) { c.Source = src; c.Seed = 77; c.TargetSetSize = 1000 })
		if !slices.Equal(full.BaseIndices, small.BaseIndices) {
			t.Errorf("source %s: target_set_size 1000 changed the base indices:\n%v\n%v", src, full.BaseIndices[:10], small.BaseIndices[:10])
		}
		if small.TargetSet.N != 1000 || full.TargetSet.N != 50000 {
			t.Errorf("source %s: target sets of %d and %d examples, want 50000 and 1000", src, full.TargetSet.N, small.TargetSet.N)
		}
		// The small target set is the prefix of the full one (nested subsets).
		if !slices.Equal(small.TargetSet.Labels, full.TargetSet.Labels[:1000]) {
			t.Errorf("source %s: the 1000-example target set is not the prefix of the full one", src)
		}
	}
}

func TestBaseSeed(t *testing.T) {
	a := loadForTest(t, func(c *config.Config) { c.Seed = 5 })
	seed := int64(5)
	b := loadForTest(t, func(c *config.Config) { c.Seed = 6; c.BaseSeed = &seed })
	if !slices.Equal(a.BaseIndices, b.BaseIndices) || !slices.Equal(a.Validation.Labels, b.Validation.Labels) {
		t.Error("base_seed 5 under seed 6 did not give seed 5's base examples and split")
	}
	c := loadForTest(t, func(c *config.Config) { c.Seed = 6 })
	if slices.Equal(a.BaseIndices, c.BaseIndices) {
		t.Error("seeds 5 and 6 chose the same base examples")
	}
	def := config.Default()
	def.Seed = 9
	cfg, err := def.Resolved()
	if err != nil || cfg.BaseSelectionSeed() != 9 || cfg.BaseSeed == nil || *cfg.BaseSeed != 9 {
		t.Errorf("default base seed %d (%v), want the run's 9", cfg.BaseSelectionSeed(), err)
	}
}

func TestBaseIndicesReproduceRun(t *testing.T) {
	run := loadForTest(t, func(c *config.Config) { c.Seed = 11; c.BaseExamples = 20 })
	path := filepath.Join(t.TempDir(), "idx.txt")
	text := ""
	for _, v := range run.BaseIndices {
		text += " " + strconv.FormatInt(v, 10)
	}
	if err := os.WriteFile(path, []byte("# from a run\n"+text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := data.ReadBaseIndices(path)
	if err != nil {
		t.Fatal(err)
	}
	// Another run seed, the same base seed: the same examples, images and labels.
	seed := int64(11)
	again := loadForTest(t, func(c *config.Config) {
		c.Seed = 12
		c.BaseSeed = &seed
		c.BaseIndices = idx
		c.BaseExamples = len(idx)
	})
	if !slices.Equal(again.BaseIndices, run.BaseIndices) || !slices.Equal(again.Base.Labels, run.Base.Labels) ||
		!slices.Equal(again.Base.Images, run.Base.Images) {
		t.Error("--base-indices did not reproduce the run's base examples")
	}
	// An index in the validation part is refused with its value named.
	valIdx := int64(data.Permutation(60000, uint64(seed), data.StreamSplit)[50000]) // the first validation image
	cfg := config.Default()
	cfg.DataDir, cfg.BaseIndices, cfg.BaseExamples, cfg.Seed = sharedDataDir(t), []int64{valIdx}, 1, 11
	cfg, err = cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadData(cfg); err == nil || !strings.Contains(err.Error(), "base_indices") || !strings.Contains(err.Error(), strconv.FormatInt(valIdx, 10)) {
		t.Errorf("a validation index: got %v", err)
	}
	// Duplicates and a wrong count are configuration errors.
	bad := config.Default()
	bad.BaseIndices, bad.BaseExamples = []int64{3, 3}, 2
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate indices: got %v", err)
	}
	bad.BaseIndices, bad.BaseExamples = []int64{3, 4}, 3
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "lists 2") {
		t.Errorf("count mismatch: got %v", err)
	}
}
