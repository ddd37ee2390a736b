package npz

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleArrays mirrors arrays() in testdata/gen_numpy.py.
func sampleArrays() []*Array {
	f4 := make([]float32, 6)
	for i := range f4 {
		f4[i] = float32(i)*0.5 - 1
	}
	return []*Array{
		{Name: "f4", DType: "float32", Shape: []int{2, 3}, Data: f4},
		{Name: "f8", DType: "float64", Shape: []int{3}, Data: []float64{math.Pi, -math.E, 1e300}},
		{Name: "i8", DType: "int64", Shape: []int{2, 2}, Data: []int64{-(1 << 62), -1, 0, 1 << 62}},
		{Name: "i4", DType: "int32", Shape: []int{4}, Data: []int32{math.MinInt32, -1, 0, math.MaxInt32}},
		{Name: "u1", DType: "uint8", Shape: []int{2, 2, 2}, Data: []uint8{250, 251, 252, 253, 254, 255, 0, 1}},
		{Name: "b1", DType: "bool", Shape: []int{3}, Data: []bool{true, false, true}},
		{Name: "scalar", DType: "float64", Shape: []int{}, Data: []float64{2.5}},
		{Name: "empty", DType: "float32", Shape: []int{0, 3}, Data: []float32{}},
	}
}

func equalArrays(t *testing.T, got, want []*Array) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d arrays, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) {
			t.Errorf("array %d: got %s %s %v, want %s %s %v", i, g.Name, g.DType, g.Shape, w.Name, w.DType, w.Shape)
			continue
		}
		if !reflect.DeepEqual(g.Data, w.Data) {
			t.Errorf("array %s: got data %v, want %v", w.Name, g.Data, w.Data)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		var buf bytes.Buffer
		var err error
		if compressed {
			err = WriteCompressed(&buf, sampleArrays())
		} else {
			err = Write(&buf, sampleArrays())
		}
		if err != nil {
			t.Fatal(err)
		}
		a, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("compressed=%v: %v", compressed, err)
		}
		equalArrays(t, a.Arrays, sampleArrays())
		if got := a.Names(); !reflect.DeepEqual(got, []string{"f4", "f8", "i8", "i4", "u1", "b1", "scalar", "empty"}) {
			t.Errorf("Names() = %v", got)
		}
		if a.Get("i4") == nil || a.Get("nope") != nil {
			t.Errorf("Get misbehaves")
		}
	}
}

func TestRoundTripFile(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.npz", "b.npz"} {
		path := filepath.Join(dir, name)
		write := WriteFile
		if name == "b.npz" {
			write = WriteFileCompressed
		}
		if err := write(path, sampleArrays()); err != nil {
			t.Fatal(err)
		}
		a, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		equalArrays(t, a.Arrays, sampleArrays())
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", st.Mode().Perm())
		}
	}
	// Overwrite in place, then check that no temporary file is left behind.
	if err := WriteFile(filepath.Join(dir, "a.npz"), sampleArrays()[:1]); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(filepath.Join(dir, "a.npz"))
	if err != nil || len(a.Arrays) != 1 {
		t.Fatalf("after overwrite: %v, %v", a, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want 2 (temporary file left?)", len(entries))
	}
}

func TestWriteFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.npz")
	if err := WriteFile(path, sampleArrays()); err != nil {
		t.Fatal(err)
	}
	bad := []*Array{{Name: "x", DType: "float32", Shape: []int{2}, Data: []float32{1}}}
	err := WriteFile(path, bad)
	var e *Error
	if !errors.As(err, &e) || e.File != path || !strings.Contains(err.Error(), "needs 2 elements") {
		t.Fatalf("got %v", err)
	}
	a, err := ReadFile(path)
	if err != nil || len(a.Arrays) != len(sampleArrays()) {
		t.Fatalf("old file damaged: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x.npz"), sampleArrays()); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestNPYRoundTrip(t *testing.T) {
	for _, a := range sampleArrays() {
		var buf bytes.Buffer
		if err := WriteNPY(&buf, a); err != nil {
			t.Fatal(err)
		}
		if buf.Len() < 64 || bytes.IndexByte(buf.Bytes(), '\n')%64 != 63 {
			t.Errorf("%s: header not padded to 64 bytes", a.Name)
		}
		got, err := ReadNPY(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		got.Name = a.Name
		equalArrays(t, []*Array{got}, []*Array{a})
	}
}

func TestWriteValidation(t *testing.T) {
	cases := []struct {
		arrays []*Array
		want   string
	}{
		{[]*Array{{Name: "a", DType: "float32", Shape: []int{3}, Data: []float32{1, 2}}}, "needs 3 elements"},
		{[]*Array{{Name: "a", DType: "float64", Shape: []int{1}, Data: []float32{1}}}, "does not match"},
		{[]*Array{{Name: "a", DType: "int16", Shape: []int{1}, Data: []int16{1}}}, "unsupported data type"},
		{[]*Array{{Name: "", DType: "uint8", Shape: []int{1}, Data: []uint8{1}}}, "empty name"},
		{[]*Array{{Name: "a", DType: "uint8", Shape: []int{1}, Data: []uint8{1}}, {Name: "a", DType: "uint8", Shape: []int{1}, Data: []uint8{1}}}, "duplicate"},
		{[]*Array{nil}, "nil"},
		{[]*Array{{Name: "a", DType: "uint8", Shape: []int{-1}, Data: []uint8{}}}, "negative dimension"},
	}
	for _, c := range cases {
		err := Write(&bytes.Buffer{}, c.arrays)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	if _, err := New("x", []int{2, 2}, []float32{1, 2, 3}); err == nil {
		t.Error("New accepted a shape mismatch")
	}
	a, err := New("x", []int{2}, []int64{1, 2})
	if err != nil || a.DType != "int64" {
		t.Errorf("New: %v %v", a, err)
	}
	if _, err := a.Float32s(); err == nil {
		t.Error("Float32s on int64 data succeeded")
	}
	if v, err := a.Int64s(); err != nil || len(v) != 2 {
		t.Error("Int64s failed")
	}
}

func TestNumpyCompat(t *testing.T) {
	for _, f := range []string{"numpy_savez.npz", "numpy_savez_compressed.npz"} {
		a, err := ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		equalArrays(t, a.Arrays, sampleArrays())
	}
	a, err := ReadFile("testdata/numpy_positional.npz")
	if err != nil {
		t.Fatal(err)
	}
	equalArrays(t, a.Arrays, []*Array{
		{Name: "arr_0", DType: "int64", Shape: []int{3}, Data: []int64{0, 1, 2}},
		{Name: "arr_1", DType: "uint8", Shape: []int{4}, Data: []uint8{0, 1, 2, 3}},
	})
	a, err = ReadFile("testdata/numpy_single.npy")
	if err != nil {
		t.Fatal(err)
	}
	equalArrays(t, a.Arrays, []*Array{{Name: "numpy_single", DType: "int64", Shape: []int{5}, Data: []int64{-2, -1, 0, 1, 2}}})
}

// Our .npy bytes are identical to NumPy's for the same array.
func TestHeaderMatchesNumpy(t *testing.T) {
	zr, err := zip.OpenReader("testdata/numpy_savez.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	want := map[string][]byte{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		var b bytes.Buffer
		b.ReadFrom(rc)
		rc.Close()
		want[strings.TrimSuffix(f.Name, ".npy")] = b.Bytes()
	}
	for _, a := range sampleArrays() {
		var buf bytes.Buffer
		if err := WriteNPY(&buf, a); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want[a.Name]) {
			t.Errorf("%s: our bytes\n%q\ndiffer from NumPy's\n%q", a.Name, buf.Bytes(), want[a.Name])
		}
	}
}

func TestNumpyRejected(t *testing.T) {
	cases := map[string]string{
		"numpy_bigendian.npz":  "big-endian",
		"numpy_fortran.npz":    "fortran_order=True",
		"numpy_object.npz":     "object arrays",
		"numpy_float16.npz":    "unsupported dtype \"<f2\"",
		"numpy_structured.npz": "structured dtypes",
	}
	for f, want := range cases {
		path := filepath.Join("testdata", f)
		_, err := ReadFile(path)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want *Error", f, err)
			continue
		}
		if e.File != path || e.Member != "x.npy" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %q (file %q member %q), want mention of %q", f, err, e.File, e.Member, want)
		}
	}
}

// npyV1 builds an .npy stream with a version 1.0 header.
func npyV1(dict string, data []byte) []byte {
	b := []byte(npyMagic + "\x01\x00")
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)+1))
	b = append(b, dict...)
	b = append(b, '\n')
	return append(b, data...)
}

// zipOf wraps members (name, bytes) in a stored zip.
func zipOf(t testing.TB, members ...any) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i < len(members); i += 2 {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: members[i].(string), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[i+1].([]byte))
	}
	zw.Close()
	return buf.Bytes()
}

func TestBadInput(t *testing.T) {
	good := npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8))
	goodZip := zipOf(t, "x.npy", good)
	corruptCRC := bytes.Clone(goodZip)
	// Flip a data byte inside the stored member (the header starts at offset 30+5).
	corruptCRC[30+5+len(good)-1] ^= 0xff

	cases := []struct {
		name, want string
		data       []byte
	}{
		{"empty", "bad magic", nil},
		{"text", "bad magic", []byte("hello world")},
		{"truncated zip", "not a valid zip", goodZip[:len(goodZip)-10]},
		{"crc", "checksum", corruptCRC},
		{"npy bad magic", "bad magic", zipOf(t, "x.npy", []byte("\x93NUMPZ\x01\x00"))},
		{"header beyond file", "beyond the end", zipOf(t, "x.npy", append([]byte(npyMagic+"\x01\x00\xff\x7f"), "{}"...))},
		{"short header", "truncated header", []byte(npyMagic + "\x01")},
		{"version", "unsupported .npy format version 9.0", zipOf(t, "x.npy", []byte(npyMagic+"\x09\x00\x00\x00"))},
		{"shape mismatch", "needs 12 bytes", zipOf(t, "x.npy", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 8)))},
		{"bare npy truncated", "needs 12 bytes", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 8))},
		{"bare npy extra", "needs 4 bytes", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8))},
		{"dtype", "unsupported dtype \"<c8\"", npyV1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8))},
		{"pipe f4", "only valid for 1-byte", npyV1("{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }", make([]byte, 4))},
		{"missing key", "missing key \"shape\"", npyV1("{'descr': '<f4', 'fortran_order': False}", nil)},
		{"extra key", "unexpected key", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", make([]byte, 4))},
		{"duplicate key", "duplicate key", npyV1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", make([]byte, 4))},
		{"negative", "non-negative integer", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", nil)},
		{"not tuple", "not a tuple", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1), }", make([]byte, 4))},
		{"huge", "too large", npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", nil)},
		{"bool byte", "must be 0 or 1", npyV1("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", []byte{1, 2})},
		{"directory", "directories", zipOf(t, "d/", []byte{})},
		{"dup member", "duplicate array name", zipOf(t, "x.npy", good, "x", good)},
		{"non npy member", "bad magic", zipOf(t, "readme.txt", []byte("hello"))},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.data), int64(len(c.data)))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want *Error containing %q", c.name, err, c.want)
		}
	}
	// ReadNPY with an unknown length: truncation is detected while reading.
	_, err := ReadNPY(bytes.NewReader(npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }", make([]byte, 100))))
	if err == nil || !strings.Contains(err.Error(), "truncated data") {
		t.Errorf("ReadNPY truncated: %v", err)
	}
}

func TestErrorNamesFileAndMember(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.npz")
	os.WriteFile(path, zipOf(t, "weights.npy", npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", nil)), 0o644)
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "member weights.npy") {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "absent.npz")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// NumPy loads what we write (skipped without /usr/bin/python3 + numpy).
func TestNumpyReadsOurs(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skip("no /usr/bin/python3 with numpy")
	}
	dir := t.TempDir()
	for _, name := range []string{"s.npz", "c.npz"} {
		path := filepath.Join(dir, name)
		write := WriteFile
		if name == "c.npz" {
			write = WriteFileCompressed
		}
		if err := write(path, sampleArrays()); err != nil {
			t.Fatal(err)
		}
		script := `
import sys, numpy as np
sys.path.insert(0, "testdata")
z = np.load(sys.argv[1])
ref = np.load("testdata/numpy_savez.npz")
assert list(z.keys()) == list(ref.keys()), (list(z.keys()), list(ref.keys()))
for k in ref.keys():
    a, b = z[k], ref[k]
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), k
print("ok")
`
		out, err := exec.Command(py, "-c", script, path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok") {
			t.Errorf("%s: numpy could not read our file: %v\n%s", name, err, out)
		}
	}
}
