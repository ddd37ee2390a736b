package torch

// pickle_test.go: SavePickle and LoadPickle: round trips of every dtype an artifact uses
// (empty and 0-d tensors included), what is saved of views, devices and requires-grad, the
// refusals, and, where python3 has torch, that torch.load reads our files as a dict of
// tensors and that LoadPickle reads torch.save's.

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type pickleCase struct {
	name  string
	dtype DType
	shape []int64
	vals  []float64 // flattened values
}

func pickleCases() []pickleCase {
	seq := func(n int, f func(i int) float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	return []pickleCase{
		{"images", Float, []int64{2, 1, 2, 3}, seq(12, func(i int) float64 { return float64(float32(0.1*float64(i) - 0.55)) })},
		{"labels", Double, []int64{3, 2}, seq(6, func(i int) float64 { return 1.0/3 + float64(i)*1e-9 })},
		{"base_indices", Long, []int64{4}, []float64{7, 0, 1 << 40, -3}},
		{"bytes", Uint8, []int64{2, 2}, []float64{0, 1, 128, 255}},
		{"int32", Int, []int64{2}, []float64{-2147483648, 2147483647}},
		{"mask", Bool, []int64{3}, []float64{1, 0, 1}},
		{"empty", Float, []int64{0, 3}, nil},
		{"scalar", Double, []int64{}, []float64{2.5}},
		{"scalar_long", Long, []int64{}, []float64{-42}},
	}
}

// makeCase builds the tensor of c (through float64, which holds all of its values exactly).
func makeCase(tb testing.TB, c pickleCase) *Tensor {
	tb.Helper()
	x := tensors(tb)(FromFloat64(c.vals, c.shape...))
	if c.dtype == Double {
		return x
	}
	return tensors(tb)(x.ToDType(c.dtype))
}

func checkCase(tb testing.TB, c pickleCase, x *Tensor) {
	tb.Helper()
	if x.DType() != c.dtype || fmt.Sprint(x.Shape()) != fmt.Sprint(c.shape) || x.Device() != CPU || x.RequiresGrad() {
		tb.Fatalf("%s: got %v (requires grad %v), want %s %v on the CPU", c.name, x, x.RequiresGrad(), c.dtype, c.shape)
	}
	got := need[[]float64](tb)(tensors(tb)(x.ToDType(Double)).Float64s())
	if fmt.Sprint(got) != fmt.Sprint(c.vals) && !(len(got) == 0 && len(c.vals) == 0) {
		tb.Fatalf("%s: values %v, want %v", c.name, got, c.vals)
	}
}

func savePickleCases(tb testing.TB, path string) []pickleCase {
	tb.Helper()
	cases := pickleCases()
	names := make([]string, len(cases))
	ts := make([]*Tensor, len(cases))
	for i, c := range cases {
		names[i], ts[i] = c.name, makeCase(tb, c)
	}
	ok(tb, SavePickle(path, names, ts))
	return cases
}

func TestPickleRoundTrip(t *testing.T) {
	scoped(t)
	path := filepath.Join(t.TempDir(), "distilled.pt")
	cases := savePickleCases(t, path)
	names, ts, err := LoadPickle(path)
	ok(t, err)
	if len(names) != len(cases) {
		t.Fatalf("loaded %d tensors, want %d", len(names), len(cases))
	}
	for i, c := range cases {
		if names[i] != c.name {
			t.Fatalf("name %d is %q, want %q (the order written)", i, names[i], c.name)
		}
		checkCase(t, c, ts[i])
	}
	// Saving again replaces the file atomically; no temporary file is left behind.
	ok(t, SavePickle(path, []string{"only"}, []*Tensor{ts[0]}))
	names, _, err = LoadPickle(path)
	ok(t, err)
	if fmt.Sprint(names) != "[only]" {
		t.Fatalf("after overwrite: %v", names)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries after two saves, want 1", len(entries))
	}
	// No tensors at all is an empty dict.
	ok(t, SavePickle(path, nil, nil))
	names, ts, err = LoadPickle(path)
	ok(t, err)
	if len(names) != 0 || len(ts) != 0 {
		t.Fatalf("empty dict loaded as %v", names)
	}
}

// A view of a large tensor is saved as its own elements (the pickle stores whole
// storages); requires-grad tensors are saved detached.
func TestPickleSavesOnlyOwnElements(t *testing.T) {
	scoped(t)
	big := tensors(t)(Arange(0, 100000, 1, WithDType(Float)))
	row := tensors(t)(big.Narrow(0, 500, 3))
	strided := tensors(t)(tensors(t)(big.Reshape(1000, 100)).Transpose(0, 1))
	col := tensors(t)(strided.Select(0, 7)) // every 100th element from 7
	w := tensors(t)(FromFloat32([]float32{1, 2}, 2))
	ok(t, w.SetRequiresGrad(true))
	path := filepath.Join(t.TempDir(), "v.pt")
	ok(t, SavePickle(path, []string{"row", "col", "w"}, []*Tensor{row, col, w}))
	st, err := os.Stat(path)
	ok(t, err)
	if st.Size() > 16<<10 {
		t.Fatalf("file is %d bytes: the views' whole storage (400 kB) was saved", st.Size())
	}
	_, ts, err := LoadPickle(path)
	ok(t, err)
	if got := need[[]float32](t)(ts[0].Float32s()); fmt.Sprint(got) != "[500 501 502]" {
		t.Fatalf("row %v", got)
	}
	got := need[[]float32](t)(ts[1].Float32s())
	if len(got) != 1000 || got[0] != 7 || got[1] != 107 || got[999] != 99907 {
		t.Fatalf("column: %d values, %v …", len(got), got[:3])
	}
	if ts[2].RequiresGrad() || !w.RequiresGrad() {
		t.Fatal("requires-grad should be dropped in the file and kept on the source")
	}
}

func TestPickleRefusals(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.pt")
	a := tensors(t)(FromFloat32([]float32{1}, 1))
	freed := tensors(t)(FromFloat32([]float32{1}, 1))
	freed.Free()
	bad := []struct {
		names []string
		ts    []*Tensor
		want  string
	}{
		{[]string{"a"}, nil, "1 names for 0 tensors"},
		{[]string{""}, []*Tensor{a}, "non-empty"},
		{[]string{"a", "a"}, []*Tensor{a, a}, "unique"},
		{[]string{"a\x00b"}, []*Tensor{a}, "NUL"},
		{[]string{"a"}, []*Tensor{nil}, "nil tensor"},
		{[]string{"a"}, []*Tensor{freed}, ErrFreed.Error()},
	}
	for _, b := range bad {
		err := SavePickle(path, b.names, b.ts)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("SavePickle(%q): %v, want an error mentioning %q", b.names, err, b.want)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused save left a file: %v", err)
	}
	if err := SavePickle(filepath.Join(dir, "absent", "x.pt"), []string{"a"}, []*Tensor{a}); err == nil {
		t.Fatal("save into a missing folder succeeded")
	}

	if _, _, err := LoadPickle(filepath.Join(dir, "absent.pt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	for name, content := range map[string][]byte{"empty": nil, "text": []byte("not a pickle\n")} {
		p := filepath.Join(dir, name)
		ok(t, os.WriteFile(p, content, 0o644))
		if _, _, err := LoadPickle(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s file: %v (want an error naming the file)", name, err)
		}
	}
}

// Every truncation of a saved file fails to load, with an error and never a crash.
func TestPickleTruncated(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "full.pt")
	savePickleCases(t, path)
	data, err := os.ReadFile(path)
	ok(t, err)
	cut := filepath.Join(dir, "cut.pt")
	for n := 0; n < len(data); n++ {
		ok(t, os.WriteFile(cut, data[:n], 0o644))
		if names, ts, err := LoadPickle(cut); err == nil {
			freeAll(ts)
			t.Fatalf("truncated to %d of %d bytes: loaded %v", n, len(data), names)
		}
	}
}

// rewritePickle copies the archive at src to dst with its data.pkl edited, in a zip with
// fresh CRCs: a damaged file that the zip checks cannot catch.
func rewritePickle(t *testing.T, src, dst string, edit func([]byte) []byte) {
	t.Helper()
	zr, err := zip.OpenReader(src)
	ok(t, err)
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		ok(t, err)
		b, err := io.ReadAll(rc)
		ok(t, err)
		rc.Close()
		if strings.HasSuffix(f.Name, "/data.pkl") {
			b = edit(b)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		ok(t, err)
		_, err = w.Write(b)
		ok(t, err)
	}
	ok(t, zw.Close())
	ok(t, os.WriteFile(dst, buf.Bytes(), 0o644))
}

// A pickle that states a longer storage than its record holds, or sizes that reach past the
// storage, is refused (libtorch's own reader would hand out a tensor reading outside its
// memory).
func TestPickleLyingSizes(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.pt")
	x := tensors(t)(FromFloat32([]float32{1, 2, 3, 4}, 4))
	ok(t, SavePickle(path, []string{"x"}, []*Tensor{x}))
	// Storage persistent id: (…, 'cpu', numel); then offset 0, sizes (4,), strides (1,).
	storageNumel := []byte("cpuq\x05K\x04t")
	sizes := []byte("K\x00(K\x04t(K\x01t")
	for _, c := range []struct {
		name     string
		old, new []byte
		want     string
	}{
		{"storage", storageNumel, []byte("cpuq\x05K\x40t"), "a storage states 256 bytes, its record holds 16"},
		{"sizes", sizes, []byte("K\x00(K\x40t(K\x01t"), "reaches past its storage"},
		{"offset", sizes, []byte("K\x02(K\x04t(K\x01t"), "reaches past its storage"},
		{"unchanged", sizes, sizes, ""},
	} {
		bad := filepath.Join(dir, c.name+".pt")
		rewritePickle(t, path, bad, func(b []byte) []byte {
			if bytes.Count(b, c.old) != 1 {
				t.Fatalf("%s: pattern %q not found once in the pickle", c.name, c.old)
			}
			return bytes.Replace(b, c.old, c.new, 1)
		})
		_, ts, err := LoadPickle(bad)
		if c.want == "" {
			ok(t, err)
			checkCase(t, pickleCase{"x", Float, []int64{4}, []float64{1, 2, 3, 4}}, ts[0])
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
	}
}

// pythonTorch returns a python3 that imports torch, or skips the test.
func pythonTorch(t *testing.T) string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import torch").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with torch (scripts/setup.sh --bench installs Debian's python3-torch)")
	return ""
}

// torch.load reads SavePickle's file as a dict with our names, dtypes, shapes and values,
// each tensor holding only its own storage; LoadPickle reads torch.save's dict.
func TestPicklePyTorchReadsOurs(t *testing.T) {
	py := pythonTorch(t)
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "distilled.pt")
	cases := savePickleCases(t, path)
	type want struct {
		Name   string    `json:"name"`
		DType  string    `json:"dtype"`
		Shape  []int64   `json:"shape"`
		Values []float64 `json:"values"`
	}
	ws := make([]want, len(cases))
	for i, c := range cases {
		ws[i] = want{c.name, "torch." + map[DType]string{Float: "float32", Double: "float64", Long: "int64",
			Uint8: "uint8", Int: "int32", Bool: "bool"}[c.dtype], c.shape, c.vals}
		if ws[i].Values == nil {
			ws[i].Values = []float64{}
		}
	}
	spec, err := json.Marshal(ws)
	ok(t, err)
	specPath := filepath.Join(dir, "want.json")
	ok(t, os.WriteFile(specPath, spec, 0o644))
	script := `
import inspect, json, sys, torch
d = torch.load(sys.argv[1])
assert type(d) is dict, type(d)
if "weights_only" in inspect.signature(torch.load).parameters:
    w = torch.load(sys.argv[1], weights_only=True)
    assert list(w.keys()) == list(d.keys())
want = json.load(open(sys.argv[2]))
assert list(d.keys()) == [w["name"] for w in want], list(d.keys())
for w in want:
    t = d[w["name"]]
    assert isinstance(t, torch.Tensor), w["name"]
    assert str(t.dtype) == w["dtype"], (w["name"], t.dtype)
    assert list(t.shape) == w["shape"], (w["name"], t.shape)
    assert t.flatten().double().tolist() == w["values"], (w["name"], t.flatten().tolist())
    assert not t.requires_grad and t.device.type == "cpu", w["name"]
    assert t.storage().size() == t.numel(), (w["name"], t.storage().size())
torch.save({"a": torch.arange(5, dtype=torch.float32).reshape(1, 5), "n": torch.tensor(7), "h": torch.tensor([1.5], dtype=torch.float16)}, sys.argv[3])
print("ok", torch.__version__)
`
	theirs := filepath.Join(dir, "theirs.pt")
	out, err := exec.Command(py, "-c", script, path, specPath, theirs).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("torch.load of our file: %v\n%s", err, out)
	}
	t.Logf("%s: %s", py, strings.TrimSpace(string(out)))
	names, ts, err := LoadPickle(theirs)
	ok(t, err)
	if fmt.Sprint(names) != "[a n h]" {
		t.Fatalf("names of torch.save's dict: %v", names)
	}
	checkCase(t, pickleCase{"a", Float, []int64{1, 5}, []float64{0, 1, 2, 3, 4}}, ts[0])
	checkCase(t, pickleCase{"n", Long, []int64{}, []float64{7}}, ts[1])
	checkCase(t, pickleCase{"h", Half, []int64{1}, []float64{1.5}}, ts[2])
}
