package selectbase

// file.go: a selection's files: the index file (with its select-base header line) and its
// JSON record beside it (SidecarPath), written together and read back checked against each
// other; the fingerprint and Plan that say whether a finished selection would be made
// again.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// fingerprint identifies what a selection's results depend on (not how many candidates
// the paper strategy draws: candidate k is the same set and scores for any K > k).
func fingerprint(sel *Selection) string {
	st := sel.Settings
	st.Candidates = 0
	b, _ := json.Marshal(struct {
		Strategy       string            `json:"strategy"`
		Settings       Settings          `json:"settings"`
		Dataset        string            `json:"dataset"`
		N              int               `json:"n"`
		BaseSeed       int64             `json:"base_seed"`
		ValidationSize int               `json:"validation_size"`
		Data           map[string]string `json:"data"`
	}{sel.Strategy, st, sel.Dataset, sel.BaseExamples, sel.BaseSeed, sel.ValidationSize, sel.DataSHA256})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SidecarPath is where Write puts the JSON record of an index file.
func SidecarPath(indexFile string) string { return indexFile + ".json" }

// Header is the index file's header line for the selection.
func (sel *Selection) Header() (data.BaseFileHeader, error) {
	st, err := json.Marshal(sel.Settings)
	return data.BaseFileHeader{Strategy: sel.Strategy, Settings: st, Dataset: sel.Dataset,
		BaseExamples: sel.BaseExamples, BaseSeed: sel.BaseSeed, ValidationSize: sel.ValidationSize}, err
}

// Write writes the index file path (the header line, a summary in comments, one index per
// line) and its JSON record SidecarPath(path), each atomically, the record first.
func (sel *Selection) Write(path string) error {
	h, err := sel.Header()
	if err != nil {
		return err
	}
	notes := []string{fmt.Sprintf("%d base examples of %s (base seed %d), strategy %s; scores and settings: %s",
		sel.BaseExamples, sel.Dataset, sel.BaseSeed, sel.Strategy, filepath.Base(SidecarPath(path)))}
	if p := sel.Paper; p != nil {
		c := p.Candidates[p.Chosen]
		notes = append(notes, fmt.Sprintf("candidate %d of %d: best mean validation accuracy %.2f%% after %d steps (%d repeats)",
			p.Chosen, len(p.Candidates), c.Best, c.BestStep, len(c.Accuracies)))
	}
	text, err := data.FormatBaseFile(h, notes, sel.Indices, sel.Classes)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(text)
	sel.IndexFileSHA256 = hex.EncodeToString(sum[:])
	js, err := json.MarshalIndent(sel, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(SidecarPath(path), append(js, '\n')); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, text)
}

// ReadSelection reads the JSON record of the index file path and checks that the index file
// is the one it describes.
func ReadSelection(path string) (*Selection, error) {
	b, err := boundedread.ReadFile(SidecarPath(path), config.MaxFileBytes, "select-base record")
	if err != nil {
		return nil, err
	}
	var sel Selection
	if err := json.Unmarshal(b, &sel); err != nil {
		return nil, fmt.Errorf("%s: %w", SidecarPath(path), err)
	}
	f, err := data.ReadBaseFile(path)
	if err != nil {
		return nil, err
	}
	if f.SHA256 != sel.IndexFileSHA256 || !slices.Equal(f.Indices, sel.Indices) {
		return nil, fmt.Errorf("%s does not describe %s (sha256 %s, recorded %s)", SidecarPath(path), path, f.SHA256, sel.IndexFileSHA256)
	}
	return &sel, nil
}

// Same reports whether sel was made by the same selection as other would be (strategy,
// settings, data, N, base seed), i.e. rerunning it would give sel again.
func (sel *Selection) Same(other *Selection) bool {
	return sel.Fingerprint == other.Fingerprint && sel.Settings.Candidates == other.Settings.Candidates
}

// Plan is the selection a Select call would make, without data: its fingerprint and
// settings (to compare with a finished one before loading anything).
func Plan(cfg config.Config, o Options, dataSHA256 map[string]string) (*Selection, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.TargetSetSize, cfg.BaseIndices, cfg.BaseSelection = 0, nil, config.SelectUnbalanced
	if cfg, err = cfg.Resolved(); err != nil {
		return nil, err
	}
	if err := checkMaxSteps(o, cfg); err != nil {
		return nil, err
	}
	sel := &Selection{Strategy: o.Strategy, Dataset: cfg.Dataset, BaseExamples: cfg.BaseExamples, Seed: cfg.Seed,
		BaseSeed: cfg.BaseSelectionSeed(), ValidationSize: cfg.ValidationSize, DataSHA256: dataSHA256, Settings: settings(o, cfg)}
	sel.Fingerprint = fingerprint(sel)
	return sel, nil
}
