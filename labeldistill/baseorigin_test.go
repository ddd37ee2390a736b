package labeldistill

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// A select-base index file is read back by ReadBaseIndices (the header and notes are
// comments) and by ReadBaseFile with its header and SHA-256.
func TestBaseFileRoundTrip(t *testing.T) {
	h := BaseFileHeader{Strategy: "kmeans", Settings: json.RawMessage(`{"space":"pixels"}`), Dataset: "mnist", BaseExamples: 3, BaseSeed: 7, ValidationSize: 10000}
	text, err := FormatBaseFile(h, []string{"three # examples", "second line"}, []int64{5, 17, 2}, []int64{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sel.txt")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadBaseIndices(path)
	if err != nil || !slices.Equal(idx, []int64{5, 17, 2}) {
		t.Fatalf("ReadBaseIndices: %v %v\n%s", idx, err, text)
	}
	f, err := ReadBaseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Header == nil || f.Header.Strategy != "kmeans" || string(f.Header.Settings) != `{"space":"pixels"}` || f.Header.BaseSeed != 7 || !slices.Equal(f.Indices, idx) || len(f.SHA256) != 64 {
		t.Fatalf("ReadBaseFile: %+v %+v", f, f.Header)
	}
	// A plain list has no header; a header that is not the format's is an error naming the file.
	plain := filepath.Join(t.TempDir(), "plain.txt")
	os.WriteFile(plain, []byte("5, 17\n2\n"), 0o644)
	if f, err := ReadBaseFile(plain); err != nil || f.Header != nil || len(f.Indices) != 3 {
		t.Fatalf("plain list: %+v %v", f, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.txt")
	os.WriteFile(bad, []byte(BaseFileMarker+`{"strategy": "kmeans", "colour": 1}`+"\n5\n"), 0o644)
	if _, err := ReadBaseFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("unknown header key: %v", err)
	}
}

// CheckBaseFile refuses indices that are not the file's and a file chosen from other data,
// naming the setting.
func TestCheckBaseFile(t *testing.T) {
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.BaseIndices = "mnist", 3, []int64{5, 17, 2}
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(mod func(*BaseFileHeader)) *BaseFile {
		h := BaseFileHeader{Strategy: "paper", Dataset: "mnist", BaseExamples: 3, BaseSeed: cfg.BaseSelectionSeed(), ValidationSize: cfg.ValidationSize}
		mod(&h)
		return &BaseFile{Path: "sel.txt", Indices: []int64{5, 17, 2}, Header: &h}
	}
	if err := CheckBaseFile(cfg, hdr(func(*BaseFileHeader) {})); err != nil {
		t.Fatal(err)
	}
	for field, f := range map[string]*BaseFile{
		"base_indices":    {Path: "sel.txt", Indices: []int64{5, 17, 3}},
		"dataset":         hdr(func(h *BaseFileHeader) { h.Dataset = "kmnist" }),
		"base_seed":       hdr(func(h *BaseFileHeader) { h.BaseSeed++ }),
		"validation_size": hdr(func(h *BaseFileHeader) { h.ValidationSize = 500 }),
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
	f := &BaseFile{Path: "x.txt", SHA256: "ab", Header: &BaseFileHeader{Strategy: "herding", Settings: json.RawMessage(`{"feature_epochs":10}`)}}
	o := baseOrigin(cfg, ds, f)
	if cfg.BaseSelection != config.SelectGiven || o.Selection != config.SelectGiven || o.Balanced || !slices.Equal(o.ClassCounts, []int{3, 0, 1}) ||
		o.Strategy != "herding" || o.File != "x.txt" || o.FileSHA256 != "ab" {
		t.Fatalf("origin %+v", o)
	}
	if d := o.Describe(); !strings.Contains(d, "herding") || !strings.Contains(d, "unbalanced, per class [3 0 1]") {
		t.Fatalf("Describe: %s", d)
	}
	cfg.BaseIndices, cfg.BaseSelection = nil, config.SelectBalanced
	ds.Base.Labels = []int64{0, 1, 2}
	if o := baseOrigin(cfg, ds, nil); o.Selection != config.SelectBalanced || !o.Balanced || o.File != "" {
		t.Fatalf("drawn by the run: %+v", o)
	}
}
