package torch

// serialize_test.go: Save/Load round trips of every supported dtype (0-d and empty
// tensors included), refusal of unsupported ones, atomic replacement, and corruption
// detection: every byte of a saved file flipped, every truncation.

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// sampleTensors covers every dtype Save supports, a 0-d tensor, empty tensors and
// awkward float values (NaN, ±Inf, −0, subnormals).
func sampleTensors(t *testing.T) map[string]*Tensor {
	T := tensors(t)
	f32 := T(FromFloat32([]float32{1.5, -2, float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1)), 1e-45}, 2, 3))
	return map[string]*Tensor{
		"f32":        f32,
		"f64_scalar": T(FromFloat64([]float64{math.Pi}, []int64{}...)),
		"f64":        T(FromFloat64([]float64{math.Inf(-1), 5e-324, math.MaxFloat64, -1}, 4)),
		"i64_empty":  T(FromInt64(nil, 0, 3)),
		"i64":        T(FromInt64([]int64{math.MinInt64, -1, 0, math.MaxInt64}, 2, 2)),
		"u8":         T(FromUint8([]uint8{0, 1, 127, 128, 254, 255, 7, 9}, 2, 2, 2)),
		"bool":       T(T(FromUint8([]uint8{1, 0, 1}, 3)).ToDType(Bool)),
		"i32":        T(T(FromInt64([]int64{math.MinInt32, -1, 0, math.MaxInt32}, 4)).ToDType(Int)),
		"f32_empty":  T(FromFloat32(nil, 0)),
		"with/slash": T(FromFloat32([]float32{3}, 1, 1)),
	}
}

// sameTensor compares dtype, shape and exact bits (float NaNs compare by bit pattern).
func sameTensor(t *testing.T, name string, got, want *Tensor) bool {
	t.Helper()
	if got.DType() != want.DType() || !shapeEq(got.Shape(), want.Shape()) {
		t.Errorf("%s: got %v, want %v", name, got, want)
		return false
	}
	switch want.DType() {
	case Float:
		g, w := need[[]float32](t)(got.Float32s()), need[[]float32](t)(want.Float32s())
		for i := range w {
			if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
				t.Errorf("%s[%d] = %v, want %v", name, i, g[i], w[i])
				return false
			}
		}
	case Double:
		g, w := vals(t, got), vals(t, want)
		for i := range w {
			if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
				t.Errorf("%s[%d] = %v, want %v", name, i, g[i], w[i])
				return false
			}
		}
	default:
		g, w := need[[]int64](t)(got.Int64s()), need[[]int64](t)(want.Int64s())
		if !slices.Equal(g, w) {
			t.Errorf("%s = %v, want %v", name, g, w)
			return false
		}
	}
	return true
}

func TestSaveLoadRoundTrip(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "all.npz")
	want := sampleTensors(t)
	ok(t, Save(path, want))
	got, err := Load(path)
	ok(t, err)
	if len(got) != len(want) {
		t.Fatalf("loaded %d tensors, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, found := got[name]
		if !found {
			t.Errorf("%s missing after Load", name)
			continue
		}
		sameTensor(t, name, g, w)
		if g.RequiresGrad() || g.Device() != CPU {
			t.Errorf("%s: loaded tensor requires grad %v on %v", name, g.RequiresGrad(), g.Device())
		}
	}
	if d := got["f64_scalar"].Dim(); d != 0 {
		t.Errorf("0-d tensor came back with %d dimensions", d)
	}
	// Save sorts by name; LoadOrdered keeps the file order
	names, ts, err := LoadOrdered(path)
	ok(t, err)
	if !slices.IsSorted(names) || len(ts) != len(names) {
		t.Errorf("file order %v is not sorted", names)
	}
	// no temporary files left behind
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries after Save, want 1", len(entries))
	}
	// the archive is a plain npz: the npz package (and so NumPy) reads it
	arch, err := npz.ReadFile(path)
	ok(t, err)
	if a := arch.Get("f32"); a == nil || a.DType != "float32" || !slices.Equal(a.Shape, []int{2, 3}) {
		t.Errorf("npz view of f32: %+v", a)
	}
	if a := arch.Get("bool"); a == nil || a.DType != "bool" {
		t.Errorf("npz view of bool: %+v", a)
	}
}

func TestSaveOrderedAndSources(t *testing.T) {
	scoped(t)
	T := tensors(t)
	path := filepath.Join(t.TempDir(), "o.npz")
	x := T(Randn([]int64{3, 4}, nil, WithRequiresGrad()))
	xt := T(x.T()) // non-contiguous, requires grad
	y := T(Ones([]int64{2}, WithDType(Double)))
	ok(t, SaveOrdered(path, []string{"z", "a"}, []*Tensor{xt, y}))
	names, ts, err := LoadOrdered(path)
	ok(t, err)
	if !slices.Equal(names, []string{"z", "a"}) {
		t.Fatalf("names %v, want [z a]", names)
	}
	sameTensor(t, "z", ts[0], xt)
	sameTensor(t, "a", ts[1], y)
	// loaded tensors belong to the open scope like any other result
	if ts[0].scope == nil {
		t.Error("a loaded tensor is not owned by the open scope")
	}
	// errors: name/tensor count, duplicate or empty names
	if err := SaveOrdered(path, []string{"a"}, nil); err == nil {
		t.Error("SaveOrdered with mismatched lengths succeeded")
	}
	for _, names := range [][]string{{"a", "a"}, {""}} {
		ts := make([]*Tensor, len(names))
		for i := range ts {
			ts[i] = y
		}
		if err := SaveOrdered(path, names, ts); err == nil {
			t.Errorf("SaveOrdered(%q) succeeded", names)
		}
	}
	// a failed Save leaves the previous file intact
	names, _, err = LoadOrdered(path)
	if err != nil || len(names) != 2 {
		t.Errorf("the previous file was damaged by failed saves: %v %v", names, err)
	}
}

func TestSaveRefusesBadTensors(t *testing.T) {
	scoped(t)
	T := tensors(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.npz")
	half := T(T(Ones([]int64{2})).ToDType(Half))
	err := Save(path, map[string]*Tensor{"h": half})
	wantErr(t, err, "save", "float16", path)
	freed := T(Ones([]int64{2}))
	freed.Free()
	err = Save(path, map[string]*Tensor{"f": freed})
	wantErr(t, err, "save", "freed")
	if !errors.Is(err, ErrFreed) {
		t.Errorf("save of a freed tensor: %v does not match ErrFreed", err)
	}
	err = Save(path, map[string]*Tensor{"n": nil})
	wantErr(t, err, "save", "nil tensor")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a failed Save created the file (%v)", err)
	}
	err = Save(filepath.Join(dir, "no", "such", "folder", "x.npz"), map[string]*Tensor{})
	wantErr(t, err, "save", "no such file")
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("failed saves left %d files behind", len(entries))
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.npz")
	_, err := Load(missing)
	wantErr(t, err, "load", missing)
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Errorf("Load of a missing file: %v does not unwrap to *os.PathError", err)
	}
	junk := filepath.Join(dir, "junk.npz")
	ok(t, os.WriteFile(junk, []byte("this is not a zip file at all"), 0o644))
	_, err = Load(junk)
	wantErr(t, err, "load", junk)
	var ne *npz.Error
	if !errors.As(err, &ne) {
		t.Errorf("Load of junk: %v does not unwrap to *npz.Error", err)
	}
}

// A NumPy-style archive (np.savez: no comment, float16 unsupported) loads through the
// CRC checks alone; a foreign comment is refused.
func TestLoadNumPyStyleArchive(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "np.npz")
	a, err := npz.New("x", []int{2}, []float64{1, 2})
	ok(t, err)
	ok(t, npz.WriteFile(path, []*npz.Array{a}))
	m, err := Load(path)
	ok(t, err)
	if v := vals(t, m["x"]); !slices.Equal(v, []float64{1, 2}) {
		t.Errorf("x = %v", v)
	}
	comp := filepath.Join(dir, "npc.npz")
	ok(t, npz.WriteFileCompressed(comp, []*npz.Array{a}))
	if _, err := Load(comp); err != nil {
		t.Errorf("np.savez_compressed-style archive: %v", err)
	}
	b, err := os.ReadFile(path)
	ok(t, err)
	// append a comment to the end-of-central-directory record (its last field)
	cpath := filepath.Join(dir, "comment.npz")
	c := append([]byte{}, b...)
	c[len(c)-2], c[len(c)-1] = 5, 0
	c = append(c, "hello"...)
	ok(t, os.WriteFile(cpath, c, 0o644))
	_, err = Load(cpath)
	wantErr(t, err, "load", cpath, "comment")
	// a bare .npy file loads as one tensor named after the file
	var buf bytes.Buffer
	ok(t, npz.WriteNPY(&buf, a))
	npy := filepath.Join(dir, "single.npy")
	ok(t, os.WriteFile(npy, buf.Bytes(), 0o644))
	m, err = Load(npy)
	ok(t, err)
	if _, found := m["single"]; !found || len(m) != 1 {
		t.Errorf("bare .npy: got %v", m)
	}
}

// TestLoadDetectsCorruption flips every byte of a saved file (two masks) and truncates it
// at every length. A flip must make Load fail with an error naming the file, or leave the
// loaded tensors bit-identical (a timestamp, an unused local-header copy of a field); a
// truncation must always fail.
func TestLoadDetectsCorruption(t *testing.T) {
	scoped(t)
	T := tensors(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "orig.npz")
	want := map[string]*Tensor{
		"w":   T(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)),
		"b":   T(FromFloat64([]float64{-1, 0.5}, 2)),
		"idx": T(FromInt64([]int64{7}, []int64{}...)),
	}
	ok(t, Save(path, want))
	orig, err := os.ReadFile(path)
	ok(t, err)
	bad := filepath.Join(dir, "bad.npz")

	identical := func(got map[string]*Tensor) bool {
		if len(got) != len(want) {
			return false
		}
		for n, w := range want {
			g, found := got[n]
			if !found || g.DType() != w.DType() || !shapeEq(g.Shape(), w.Shape()) {
				return false
			}
			if !slices.Equal(need[[]float64](t)(g.Float64s()), need[[]float64](t)(w.Float64s())) {
				return false
			}
		}
		return true
	}
	detected, harmless := 0, 0
	for _, mask := range []byte{0xff, 0x01} {
		for i := range orig {
			b := slices.Clone(orig)
			b[i] ^= mask
			ok(t, os.WriteFile(bad, b, 0o644))
			s := NewScope()
			got, err := Load(bad)
			switch {
			case err != nil:
				detected++
				if !strings.Contains(err.Error(), bad) {
					t.Errorf("flip at %d: error does not name the file: %v", i, err)
				}
			case identical(got):
				harmless++
			default:
				t.Errorf("flip of byte %d (mask %#x) changed the loaded tensors without an error", i, mask)
			}
			s.Close()
		}
	}
	truncations := 0
	for n := 0; n < len(orig); n++ {
		ok(t, os.WriteFile(bad, orig[:n], 0o644))
		s := NewScope()
		_, err := Load(bad)
		s.Close()
		if err == nil {
			t.Errorf("file truncated to %d of %d bytes loaded without error", n, len(orig))
			continue
		}
		if !strings.Contains(err.Error(), bad) {
			t.Errorf("truncation to %d: error does not name the file: %v", n, err)
		}
		truncations++
	}
	t.Logf("%d-byte file: %d flips detected, %d harmless (identical result); %d truncations detected",
		len(orig), detected, harmless, truncations)
}
