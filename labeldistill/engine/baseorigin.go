package engine

// baseorigin.go: where a run's base examples came from (report.json "base_origin"): drawn
// by the run, or given as base_indices, with the index file's SHA-256 and, for a file
// written by `ldtorch select-base`, the strategy and settings its header line records (the
// file format is labeldistill/data's BaseFile).

import (
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// CheckBaseFile checks that cfg (resolved) uses exactly f's indices, from the data f's
// header names: the errors are *config.FieldError of base_indices (or base_seed,
// validation_size, dataset for a header that names other data).
func CheckBaseFile(cfg config.Config, f *data.BaseFile) error {
	if !slices.Equal(cfg.BaseIndices, f.Indices) {
		return config.FieldErrorf("base_indices", "the config's %d indices are not those of %s (%d indices)", len(cfg.BaseIndices), f.Path, len(f.Indices))
	}
	h, name, what := f.Header, filepath.Base(f.Path), "was selected"
	if h == nil && f.Run != nil { // an artifact's distilled.npz: the data of its run
		h, name, what = f.Run, f.Path, "holds the base examples of a run"
	}
	if h == nil {
		return nil
	}
	switch {
	case h.Dataset != cfg.Source:
		field := "dataset"
		if cfg.IsCrossDataset() {
			field = "source"
		}
		return config.FieldErrorf(field, "%s %s from %s, the run's base examples come from %s", name, what, h.Dataset, cfg.Source)
	case h.BaseSeed != cfg.BaseSelectionSeed():
		return config.FieldErrorf("base_seed", "%s %s under base seed %d (it draws the train/validation split), the run's is %d", name, what, h.BaseSeed, cfg.BaseSelectionSeed())
	case h.ValidationSize != cfg.ValidationSize:
		return config.FieldErrorf("validation_size", "%s %s with validation_size %d, the run's is %d", name, what, h.ValidationSize, cfg.ValidationSize)
	}
	return nil
}

// baseOrigin is the origin of ds's base examples under cfg (resolved), with the file f
// (may be nil) they were read from.
func baseOrigin(cfg config.Config, ds *Data, f *data.BaseFile) *BaseOrigin {
	o := &BaseOrigin{Selection: cfg.BaseSelection}
	if cfg.BaseIndices != nil {
		o.Selection = config.SelectGiven
	}
	classes := ds.Base.Classes
	if classes <= 0 { // data given without the source's class count
		classes = ds.Classes
	}
	o.ClassCounts = make([]int, max(classes, 0))
	for _, y := range ds.Base.Labels {
		if y >= 0 && y < int64(len(o.ClassCounts)) {
			o.ClassCounts[y]++
		}
	}
	o.Balanced = len(o.ClassCounts) > 0
	for _, n := range o.ClassCounts {
		o.Balanced = o.Balanced && n == o.ClassCounts[0]
	}
	if f != nil {
		o.File, o.FileSHA256 = f.Path, f.SHA256
		if f.Header != nil {
			o.Strategy, o.Settings = f.Header.Strategy, f.Header.Settings
		}
	}
	return o
}
