package labeldistill

// baseorigin.go: where a run's base examples came from (report.json "base_origin"): drawn
// by the run, or given as base_indices, with the index file's SHA-256 and, for a file
// written by `ldtorch select-base`, the strategy and settings its header line records (the
// file format is labeldistill/data's BaseFile).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// BaseOrigin is where a run's base examples came from and what they are.
type BaseOrigin struct {
	// Selection: "balanced" or "unbalanced" when the run drew them with its base seed
	// (base_selection), "given" when they were named by base_indices.
	Selection string `json:"selection"`
	// ClassCounts are the base examples per class of the source dataset (the target's
	// within a dataset); Balanced says whether every class has the same count.
	ClassCounts []int `json:"class_counts"`
	Balanced    bool  `json:"balanced"`
	// File and FileSHA256: the index file the indices were read from (its name as given)
	// and its SHA-256; empty when they came from a config file's list.
	File       string `json:"file,omitempty"`
	FileSHA256 string `json:"file_sha256,omitempty"`
	// Strategy and Settings: how `ldtorch select-base` chose them, from the file's header
	// (empty for a file without one).
	Strategy string          `json:"strategy,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
}

// Describe is the origin in one line, for reports.
func (o *BaseOrigin) Describe() string {
	var b strings.Builder
	switch o.Selection {
	case config.SelectGiven:
		b.WriteString("given")
		if o.Strategy != "" {
			fmt.Fprintf(&b, ", chosen by select-base strategy %s", o.Strategy)
			if words := settingsWords(o.Settings); words != "" {
				fmt.Fprintf(&b, " (%s)", words)
			}
		}
		if o.File != "" {
			fmt.Fprintf(&b, "; file %s (sha256 %s)", o.File, o.FileSHA256)
		}
	default:
		fmt.Fprintf(&b, "drawn by the run (%s, with its base seed)", o.Selection)
	}
	if o.Balanced && len(o.ClassCounts) > 0 {
		fmt.Fprintf(&b, "; balanced, %d per class", o.ClassCounts[0])
	} else {
		fmt.Fprintf(&b, "; unbalanced, per class %v", o.ClassCounts)
	}
	return b.String()
}

// settingsWords writes a flat JSON object of settings as "name value, name value" in its
// order ("candidates 50, repeats 3, arch lenet"); anything else compacted to one line, as
// read back from an indented report.json it spans lines; "" for none.
func settingsWords(raw json.RawMessage) string {
	var one bytes.Buffer
	if len(raw) == 0 || json.Compact(&one, raw) != nil || one.String() == "{}" || one.String() == "null" {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(one.Bytes()))
	var words []string
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return one.String()
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return one.String()
		}
		value, err := dec.Token()
		if _, nested := value.(json.Delim); err != nil || nested {
			return one.String()
		}
		words = append(words, fmt.Sprintf("%v %v", name, value))
	}
	return strings.Join(words, ", ")
}

// WithBaseFile says that cfg.BaseIndices were read from f: the run checks that they are
// f's indices and, when f has a select-base header, that it was chosen from the run's
// source dataset under the run's base seed and validation size, and records the file,
// its SHA-256 and its strategy in Record.BaseOrigin. A resumed run without this option keeps
// the checkpoint's record of the file.
func WithBaseFile(f *data.BaseFile) RunOption { return func(o *runOptions) { o.baseFile = f } }

// CheckBaseFile checks that cfg (resolved) uses exactly f's indices, from the data f's
// header names: the errors are *config.FieldError of base_indices (or base_seed,
// validation_size, dataset for a header that names other data).
func CheckBaseFile(cfg config.Config, f *data.BaseFile) error {
	if !slices.Equal(cfg.BaseIndices, f.Indices) {
		return config.FieldErrorf("base_indices", "the config's %d indices are not those of %s (%d indices)", len(cfg.BaseIndices), f.Path, len(f.Indices))
	}
	h := f.Header
	if h == nil {
		return nil
	}
	name := filepath.Base(f.Path)
	switch {
	case h.Dataset != cfg.Source:
		field := "dataset"
		if cfg.IsCrossDataset() {
			field = "source"
		}
		return config.FieldErrorf(field, "%s was selected from %s, the run's base examples come from %s", name, h.Dataset, cfg.Source)
	case h.BaseSeed != cfg.BaseSelectionSeed():
		return config.FieldErrorf("base_seed", "%s was selected under base seed %d (it draws the train/validation split), the run's is %d", name, h.BaseSeed, cfg.BaseSelectionSeed())
	case h.ValidationSize != cfg.ValidationSize:
		return config.FieldErrorf("validation_size", "%s was selected with validation_size %d, the run's is %d", name, h.ValidationSize, cfg.ValidationSize)
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
