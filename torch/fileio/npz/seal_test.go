package npz

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSeal: a sealed archive unseals to its arrays; a changed value, name, dtype or shape,
// a dropped member or a missing seal is refused.
func TestSeal(t *testing.T) {
	mk := func(name string, shape []int, data any) *Array {
		a, err := New(name, shape, data)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	arrays := []*Array{mk("x", []int{2}, []float32{1, 2}), mk("y", []int{}, []int64{7})}
	path := filepath.Join(t.TempDir(), "s.npz")
	if err := WriteFileSealed(path, arrays); err != nil {
		t.Fatal(err)
	}
	arc, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if arc.Comment != SealComment {
		t.Errorf("comment %q", arc.Comment)
	}
	got, err := Unseal(arc.Arrays)
	if err != nil || len(got) != 2 || got[0].Name != "x" || got[1].Data.([]int64)[0] != 7 {
		t.Fatalf("Unseal: %v %v", got, err)
	}
	for name, change := range map[string]func(a []*Array) []*Array{
		"value":   func(a []*Array) []*Array { a[0].Data.([]float32)[1] = 3; return a },
		"name":    func(a []*Array) []*Array { a[1].Name = "z"; return a },
		"shape":   func(a []*Array) []*Array { a[0].Shape = []int{2, 1}; return a },
		"dropped": func(a []*Array) []*Array { return a[1:] },
		"no seal": func(a []*Array) []*Array { return a[:len(a)-1] },
	} {
		arc, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Unseal(change(arc.Arrays)); err == nil || !strings.Contains(err.Error(), "sha256") && !strings.Contains(err.Error(), "SHA-256") {
			t.Errorf("%s: Unseal gave %v", name, err)
		}
	}
}
