// Package npz reads and writes NumPy .npy arrays and .npz archives (zips of .npy members).
//
// It is deliberately small and strict. Supported element types, by NumPy descr:
//
//	descr        DType      Go slice in Array.Data
//	<f4          float32    []float32
//	<f8          float64    []float64
//	<i4          int32      []int32
//	<i8          int64      []int64
//	|u1 (or <u1) uint8      []uint8
//	|b1 (or <b1) bool       []bool   (bytes must be 0 or 1)
//
// Only C-ordered little-endian data is accepted: big-endian descrs ('>f4'), native-order
// descrs ('=f4'), fortran_order=True, object arrays ('|O'), strings, structured dtypes and
// other kinds are rejected with an *Error that says so. Format versions 1.0, 2.0 and 3.0
// of the .npy header are read; 1.0 is written (2.0 when the header needs it), padded so
// that the data starts on a 64-byte boundary, as NumPy does.
//
// An .npz archive may hold stored (np.savez) and deflated (np.savez_compressed) members.
// Member "x.npy" becomes the array named "x", as with np.load; a member whose name lacks
// the ".npy" suffix keeps its full name. Reading never panics and never allocates more
// than the input can hold: every size in a header is checked against the bytes that are
// really there before memory is allocated (FuzzRead exercises this).
//
// Writing: Write and WriteFile produce stored members like np.savez; WriteCompressed and
// WriteFileCompressed produce deflated members like np.savez_compressed. The output is
// deterministic (fixed 1980-01-01 timestamps). WriteFile and WriteFileCompressed are
// atomic: they write a temporary file in the destination directory, fsync it, rename it
// over the destination and fsync the directory.
package npz

import (
	"fmt"
	"slices"
)

// Array is one named n-dimensional array in C (row-major) order.
type Array struct {
	// Name is the array's key: the .npz member name without its ".npy" suffix.
	Name string
	// DType is one of "float32", "float64", "int32", "int64", "uint8", "bool".
	DType string
	// Shape lists the dimensions; an empty shape is a 0-d (scalar) array with one element.
	Shape []int
	// Data is a []float32, []float64, []int32, []int64, []uint8 or []bool matching DType,
	// with exactly prod(Shape) elements.
	Data any
}

// Archive is the content of an .npz (or .npy) file: its arrays in file order.
type Archive struct {
	Arrays []*Array
	// Comment is the zip archive comment (SealComment marks a sealed archive).
	Comment string
}

// Get returns the array with the given name, or nil when there is none.
func (a *Archive) Get(name string) *Array {
	for _, x := range a.Arrays {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Names returns the array names in file order.
func (a *Archive) Names() []string {
	names := make([]string, len(a.Arrays))
	for i, x := range a.Arrays {
		names[i] = x.Name
	}
	return names
}

// Error reports a malformed, unsupported or inconsistent input (or a failed write).
// File is the path ("" when reading from a plain reader), Member the .npz member name
// ("" for a bare .npy file or an archive-level problem).
type Error struct {
	File    string
	Member  string
	Problem string
	Err     error // underlying error, if any
}

func (e *Error) Error() string {
	s := "npz: "
	if e.File != "" {
		s += e.File + ": "
	}
	if e.Member != "" {
		s += "member " + e.Member + ": "
	}
	s += e.Problem
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// dtype describes one supported element type.
type dtype struct {
	name  string // Array.DType
	descr string // canonical NumPy descr written by this package
	size  int    // bytes per element
}

var dtypes = []dtype{
	{"float32", "<f4", 4},
	{"float64", "<f8", 8},
	{"int32", "<i4", 4},
	{"int64", "<i8", 8},
	{"uint8", "|u1", 1},
	{"bool", "|b1", 1},
}

func dtypeByName(name string) (dtype, bool) {
	for _, d := range dtypes {
		if d.name == name {
			return d, true
		}
	}
	return dtype{}, false
}

// dtypeOfData returns the DType name for a supported Data slice.
func dtypeOfData(data any) (string, int, bool) {
	switch v := data.(type) {
	case []float32:
		return "float32", len(v), true
	case []float64:
		return "float64", len(v), true
	case []int32:
		return "int32", len(v), true
	case []int64:
		return "int64", len(v), true
	case []uint8:
		return "uint8", len(v), true
	case []bool:
		return "bool", len(v), true
	}
	return "", 0, false
}

// maxBytes bounds the data size a header may declare (1 PiB); it only guards the
// arithmetic, real limits come from the input size.
const maxBytes = int64(1) << 50

// numElements returns prod(shape), or an error when a dimension is negative or the
// product (times itemSize) exceeds maxBytes.
func numElements(shape []int, itemSize int) (int, error) {
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %s", d, formatShape(shape))
		}
		if int64(d) > maxBytes {
			return 0, fmt.Errorf("shape %s is too large", formatShape(shape))
		}
	}
	if slices.Contains(shape, 0) {
		return 0, nil
	}
	n := int64(1)
	for _, d := range shape {
		if n > maxBytes/int64(itemSize)/int64(d) {
			return 0, fmt.Errorf("shape %s is too large", formatShape(shape))
		}
		n *= int64(d)
	}
	return int(n), nil
}

// formatShape renders a shape the way Python prints a tuple: (), (3,), (2, 3).
func formatShape(shape []int) string {
	switch len(shape) {
	case 0:
		return "()"
	case 1:
		return fmt.Sprintf("(%d,)", shape[0])
	}
	s := "("
	for i, d := range shape {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(d)
	}
	return s + ")"
}

// NumElements returns the number of elements prod(Shape) (1 for a scalar).
func (a *Array) NumElements() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// New returns an Array with the DType inferred from data, after checking that data is a
// supported slice type whose length matches shape.
func New(name string, shape []int, data any) (*Array, error) {
	a := &Array{Name: name, Shape: slices.Clone(shape), Data: data}
	dt, _, ok := dtypeOfData(data)
	if !ok {
		return nil, &Error{Member: name, Problem: fmt.Sprintf("unsupported data type %T", data)}
	}
	a.DType = dt
	if err := a.validate(); err != nil {
		return nil, &Error{Member: name, Problem: err.Error()}
	}
	return a, nil
}

// validate checks DType, Data and Shape for consistency.
func (a *Array) validate() error {
	dtName, n, ok := dtypeOfData(a.Data)
	if !ok {
		return fmt.Errorf("unsupported data type %T", a.Data)
	}
	if a.DType != dtName {
		return fmt.Errorf("DType %q does not match data of type %T", a.DType, a.Data)
	}
	dt, _ := dtypeByName(dtName)
	want, err := numElements(a.Shape, dt.size)
	if err != nil {
		return err
	}
	if want != n {
		return fmt.Errorf("shape %s needs %d elements, data has %d", formatShape(a.Shape), want, n)
	}
	return nil
}

// Float32s returns the data as []float32, or an error naming the actual dtype.
func (a *Array) Float32s() ([]float32, error) { return as[float32](a) }

// Float64s returns the data as []float64, or an error naming the actual dtype.
func (a *Array) Float64s() ([]float64, error) { return as[float64](a) }

// Int32s returns the data as []int32, or an error naming the actual dtype.
func (a *Array) Int32s() ([]int32, error) { return as[int32](a) }

// Int64s returns the data as []int64, or an error naming the actual dtype.
func (a *Array) Int64s() ([]int64, error) { return as[int64](a) }

// Uint8s returns the data as []uint8, or an error naming the actual dtype.
func (a *Array) Uint8s() ([]uint8, error) { return as[uint8](a) }

// Bools returns the data as []bool, or an error naming the actual dtype.
func (a *Array) Bools() ([]bool, error) { return as[bool](a) }

func as[T any](a *Array) ([]T, error) {
	v, ok := a.Data.([]T)
	if !ok {
		var zero T
		return nil, &Error{Member: a.Name, Problem: fmt.Sprintf("array has dtype %s, not %T", a.DType, zero)}
	}
	return v, nil
}
