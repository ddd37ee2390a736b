package engine

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// CheckBaseFile refuses indices that are not the file's and a file chosen from other data,
// naming the setting.
func TestCheckBaseFile(t *testing.T) {
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.BaseIndices = "mnist", 3, []int64{5, 17, 2}
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(mod func(*data.BaseFileHeader)) *data.BaseFile {
		h := data.BaseFileHeader{Strategy: "paper", Dataset: "mnist", BaseExamples: 3, BaseSeed: cfg.BaseSelectionSeed(), ValidationSize: cfg.ValidationSize}
		mod(&h)
		return &data.BaseFile{Path: "sel.txt", Indices: []int64{5, 17, 2}, Header: &h}
	}
	if err := CheckBaseFile(cfg, hdr(func(*data.BaseFileHeader) {})); err != nil {
		t.Fatal(err)
	}
	for field, f := range map[string]*data.BaseFile{
		"base_indices":    {Path: "sel.txt", Indices: []int64{5, 17, 3}},
		"dataset":         hdr(func(h *data.BaseFileHeader) { h.Dataset = "kmnist" }),
		"base_seed":       hdr(func(h *data.BaseFileHeader) { h.BaseSeed++ }),
		"validation_size": hdr(func(h *data.BaseFileHeader) { h.ValidationSize = 500 }),
	} {
		var fe *config.FieldError
		if err := CheckBaseFile(cfg, f); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// The origin records what the base examples are: given ones that are not balanced say so,
// whatever base_selection says.
func TestBaseOriginCountsClasses(t *testing.T) {
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.BaseIndices = "mnist", 4, []int64{1, 2, 3, 4}
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	ds := &Data{Classes: 3, Base: data.Split{Labels: []int64{0, 0, 0, 2}, Classes: 3}}
	f := &data.BaseFile{Path: "x.txt", SHA256: "ab", Header: &data.BaseFileHeader{Strategy: "herding", Settings: json.RawMessage(`{"feature_epochs":10}`)}}
	o := baseOrigin(cfg, ds, f)
	if cfg.BaseSelection != config.SelectGiven || o.Selection != config.SelectGiven || o.Balanced || !slices.Equal(o.ClassCounts, []int{3, 0, 1}) ||
		o.Strategy != "herding" || o.File != "x.txt" || o.FileSHA256 != "ab" {
		t.Fatalf("origin %+v", o)
	}
	if d := o.Describe(); !strings.Contains(d, "strategy herding (feature_epochs 10)") || !strings.Contains(d, "unbalanced, per class [3 0 1]") {
		t.Fatalf("Describe: %s", d)
	}
	// Settings as report.json holds them (indented, in the file's order) read as words.
	for raw, want := range map[string]string{
		"{\n  \"candidates\": 50,\n  \"arch\": \"lenet\",\n  \"lr\": 0.001\n}": "candidates 50, arch lenet, lr 0.001",
		`{"space": {"kind": "pixels"}}`:                                        `{"space":{"kind":"pixels"}}`,
		`{}`:                                                                   "",
		``:                                                                     "",
	} {
		if got := settingsWords(json.RawMessage(raw)); got != want {
			t.Errorf("settingsWords(%q) = %q, want %q", raw, got, want)
		}
	}
	cfg.BaseIndices, cfg.BaseSelection = nil, config.SelectBalanced
	ds.Base.Labels = []int64{0, 1, 2}
	if o := baseOrigin(cfg, ds, nil); o.Selection != config.SelectBalanced || !o.Balanced || o.File != "" {
		t.Fatalf("drawn by the run: %+v", o)
	}
}
