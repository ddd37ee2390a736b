package data

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
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

func TestReadBaseIndicesFormats(t *testing.T) {
	dir := t.TempDir()
	want := []int64{4, 8, 15, 16, 23, 42}
	arr, err := npz.New("base_indices", []int{len(want)}, want)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := npz.New("labels", []int{1}, []float32{1})
	for name, arrays := range map[string][]*npz.Array{"a.npz": {other, arr}, "b.npy": {arr}} {
		path := filepath.Join(dir, name)
		if name == "b.npy" {
			f, _ := os.Create(path)
			if err := npz.WriteNPY(f, arr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		} else if err := npz.WriteFile(path, arrays); err != nil {
			t.Fatal(err)
		}
		got, err := ReadBaseIndices(path)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: got %v, %v", name, got, err)
		}
	}
	text := filepath.Join(dir, "c.txt")
	os.WriteFile(text, []byte("4,8\n15 16 # comment\n23\n42\n"), 0o644)
	if got, err := ReadBaseIndices(text); err != nil || !slices.Equal(got, want) {
		t.Errorf("text: got %v, %v", got, err)
	}
	os.WriteFile(text, []byte("4 x\n"), 0o644)
	if _, err := ReadBaseIndices(text); err == nil || !strings.Contains(err.Error(), `line 1: "x"`) {
		t.Errorf("bad text: got %v", err)
	}
}
