package engine

// load.go: LoadData, the bridge from a Config to the data package: read and verify the
// target (and source) dataset, split it, select the base examples, record checksums.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// LoadData reads cfg's datasets from cfg.DataDir (see data.DataDir), verifies their
// checksums against the registry, splits the target's train set into target set and
// validation with the base seed (cfg.BaseSeed, default cfg.Seed), and selects the base
// examples with the same seed: balanced from the target set within a dataset, the first N
// of a seeded shuffle of the source's target-set part across datasets, or exactly
// cfg.BaseIndices when given. The base examples are chosen from the whole target set
// before cfg.TargetSetSize keeps a prefix of it, so the target-set size never changes them.
func LoadData(cfg config.Config) (*Data, error) {
	return LoadDataContext(context.Background(), cfg)
}

// LoadDataContext is LoadData that stops early, with ctx's error, once ctx is done (a
// signal): between data files and between the images of an archive or image folder.
func LoadDataContext(ctx context.Context, cfg config.Config) (*Data, error) {
	target, err := loadOne(ctx, cfg, cfg.Dataset)
	if err != nil {
		return nil, err
	}
	src, mode := target, data.Balanced
	if cfg.IsCrossDataset() {
		if src, err = loadOne(ctx, cfg, cfg.Source); err != nil {
			return nil, err
		}
	}
	if cfg.BaseSelection == config.SelectUnbalanced {
		mode = data.Unbalanced
	}
	var base *data.Base
	if cfg.BaseIndices != nil {
		idx := make([]int, len(cfg.BaseIndices))
		for i, v := range cfg.BaseIndices {
			idx[i] = int(v)
		}
		if base, err = data.SelectBaseAt(src.TargetSet, idx); err != nil {
			return nil, config.NewFieldError("base_indices", err)
		}

	} else if base, err = data.SelectBase(src.TargetSet, mode, cfg.BaseExamples, uint64(cfg.BaseSelectionSeed())); err != nil {
		return nil, config.NewFieldError("base_examples", err)
	}
	target.TargetSet = target.TargetSet.Prefix(cfg.TargetSetSize)
	ts := target.TargetSet
	if src.TargetSet.C != ts.C || src.TargetSet.H != ts.H || src.TargetSet.W != ts.W {
		return nil, fmt.Errorf("source: %s images are %d×%d×%d but %s images are %d×%d×%d", cfg.Source,
			src.TargetSet.C, src.TargetSet.H, src.TargetSet.W, cfg.Dataset, ts.C, ts.H, ts.W)
	}
	ds := &Data{
		Target: cfg.Dataset, Source: cfg.Source, Classes: ts.Classes,
		Shape:      [3]int64{int64(ts.C), int64(ts.H), int64(ts.W)},
		TargetSet:  *ts,
		Validation: *target.Validation,
		Test:       *target.Test,
		Base: data.Split{Images: base.Images, Labels: base.Labels, N: len(base.Labels), C: ts.C, H: ts.H, W: ts.W,
			Classes: src.TargetSet.Classes},
		Files: map[string]string{},
	}
	ds.NormMean, ds.NormStd = target.Spec.Mean, target.Spec.Std
	ds.Warnings = append(ds.Warnings, target.Warnings...)
	if cfg.IsCrossDataset() {
		ds.Warnings = append(ds.Warnings, src.Warnings...)
	}
	for _, i := range base.Source {
		ds.BaseIndices = append(ds.BaseIndices, int64(i))
	}
	if w := givenClassesWarning(cfg, base.Labels, src.TargetSet.Classes); w != "" {
		ds.Warnings = append(ds.Warnings, w)
	}
	// Keys are "<dataset>/<file name>", independent of where the data folder is.
	for _, d := range []struct {
		name  string
		files []string
	}{{cfg.Dataset, target.Files}, {cfg.Source, src.Files}} {
		for _, f := range d.files {
			if ds.Files[d.name+"/"+filepath.Base(f)], err = fileSHA256(f); err != nil {
				return nil, err
			}
		}
	}
	return ds, nil
}

// LoadTestSplit reads the official test split of cfg.Dataset (for `ldtorch evaluate`).
func LoadTestSplit(cfg config.Config) (*data.Split, error) {
	ds, err := loadOne(context.Background(), cfg, cfg.Dataset)
	if err != nil {
		return nil, err
	}
	return ds.Test, nil
}

// TestData is the test split of a dataset with what LoadData records of its files.
type TestData struct {
	Test     *data.Split
	Files    map[string]string // "<dataset>/<file name>" → sha256, as Data.Files
	Warnings []string          // the dataset's warnings (unknown checksums accepted, …)
}

// LoadTestData is LoadTestSplit with the files' checksums (to compare with an artifact's
// data_sha256) and the data's warnings.
func LoadTestData(cfg config.Config) (*TestData, error) {
	ds, err := loadOne(context.Background(), cfg, cfg.Dataset)
	if err != nil {
		return nil, err
	}
	td := &TestData{Test: ds.Test, Files: map[string]string{}, Warnings: ds.Warnings}
	for _, f := range ds.Files {
		if td.Files[cfg.Dataset+"/"+filepath.Base(f)], err = fileSHA256(f); err != nil {
			return nil, err
		}
	}
	return td, nil
}

// loadOne reads and splits one dataset with the base seed. The target set is kept whole
// (LoadData applies cfg.TargetSetSize after choosing the base examples); the size is
// only checked here, against the target dataset.
func loadOne(ctx context.Context, cfg config.Config, name string) (*data.Dataset, error) {
	var raw *data.RawData
	var err error
	valSize := cfg.ValidationSize
	if path, ok := data.ImageFolderPath(name); ok {
		var mean, std []float64 // nil: computed from the train images
		if name == cfg.Dataset && len(cfg.NormMean) > 0 {
			mean, std = cfg.NormMean, cfg.NormStd
		}
		if raw, err = data.LoadImageFolderContext(ctx, path, mean, std); err != nil {
			return nil, err
		}
		if name != cfg.Dataset {
			valSize = 0 // a source's own rule
		}
	} else {
		dir, err := data.DataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		spec, err := data.Lookup(name)
		if err != nil {
			return nil, err
		}
		if valSize == spec.ValidationSize {
			valSize = 0 // the registry's rule, which also adapts to subset layouts
		}
		opt := data.Options{DataDir: dir, AllowUnknown: cfg.AllowUnknownData, Transpose: cfg.EMNISTTranspose, Context: ctx}
		if raw, err = data.LoadRaw(name, opt); err != nil {
			return nil, err
		}
	}
	spec := raw.Spec
	// Sizes that only the data can rule out, named as the settings they come from.
	n := raw.Train.N
	target, validation, _ := spec.SplitSizes(n)
	if valSize > 0 {
		if valSize >= n {
			return nil, &config.FieldError{Field: "validation_size", Msg: fmt.Sprintf("%d does not leave a target set: %s has %d train images", valSize, name, n)}
		}
		target, validation = n-valSize, valSize
	}
	if name == cfg.Dataset && cfg.TargetSetSize > target {
		return nil, &config.FieldError{Field: "target_set_size", Msg: fmt.Sprintf("%d exceeds the %d images of %s's target set (%d train images, %d for validation)", cfg.TargetSetSize, target, name, n, validation)}
	}
	return raw.Split(data.SplitOptions{Seed: uint64(cfg.BaseSelectionSeed()), ValidationSize: valSize})
}

// fileSHA256 is the sha256 of a file, or data.TreeSHA256 of a folder (an image folder).
// Only a regular file is hashed: a device (/dev/zero) would be read for ever.
func fileSHA256(path string) (string, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return data.TreeSHA256(path, fileSHA256)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: is %s, not a regular file: data files must be regular files", path, boundedread.TypeName(st.Mode()))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// givenClassesWarning says when base examples given by index (within a dataset) leave
// classes out ("" otherwise): accepted, since learnt labels may spread over every class,
// but fresh models then see no image of those classes, and images learnt for the given
// examples' classes (learn images) are of those classes alone.
func givenClassesWarning(cfg config.Config, labels []int64, classes int) string {
	if cfg.BaseIndices == nil || cfg.IsCrossDataset() || classes <= 0 {
		return ""
	}
	counts := make([]int, classes)
	for _, y := range labels {
		if y >= 0 && int(y) < classes {
			counts[y]++
		}
	}
	var held, missing []string
	for c, n := range counts {
		if n > 0 {
			held = append(held, fmt.Sprintf("%d: %d", c, n))
		} else {
			missing = append(missing, strconv.Itoa(c))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	if len(missing) > 12 {
		missing = append(missing[:12], fmt.Sprintf("… %d in all", len(missing)))
	}
	return fmt.Sprintf("the %d base examples given in base_indices hold %d of %s's %d classes (examples per class %s); none of class %s: fresh models see no image of those",
		len(labels), len(held), cfg.Dataset, classes, strings.Join(held, ", "), strings.Join(missing, ", "))
}
