package torch

// serialize.go: saving and loading named tensors as NumPy .npz files.
//
// Format: an uncompressed zip archive (np.savez layout) with one .npy member per tensor,
// named "<name>.npy"; np.load(path) reads it back as a dict of arrays, and files written
// by np.savez or np.savez_compressed load here. Element types: float32 (<f4), float64
// (<f8), int32 (<i4), int64 (<i8), uint8 (|u1) and bool (|b1); other dtypes (float16,
// bfloat16, int8, int16) are refused with an error rather than converted. A 0-d tensor is
// an array of shape (), an empty tensor keeps its shape (e.g. (0, 3)). Values are copied
// to the CPU and detached: neither the device nor requires-grad is stored, and Load
// returns CPU tensors that do not require grad.
//
// Integrity. Writes are atomic: the archive goes to a temporary file in the destination's
// folder, which is fsynced, closed and renamed over the destination (then the folder is
// fsynced), so a crash leaves either the old file or the new one, never a mix. Corruption
// is detected on read, with an error naming the file:
//   - every zip member carries a CRC-32 of its bytes (the .npy header and data), which
//     archive/zip verifies when the member has been read to its end, and each .npy header
//     must account for its member's length exactly;
//   - the archive is sealed (npz.Seal, the integrity scheme of every .npz ldtorch writes
//     for itself): a last member "sha256" holds the SHA-256 over every member's name,
//     dtype, shape and values, so a renamed, dropped or swapped member is refused too;
//   - a truncated file loses the zip's end-of-central-directory record.
//
// The tests flip every bit of a saved file and truncate it at every length: each flip
// either fails Load or leaves the loaded tensors identical (e.g. a timestamp), and every
// truncation fails. Save marks its archives with the comment npz.SealComment, so Load
// requires their seal; archives without a comment (written by NumPy) are checked by the zip
// CRCs alone, and any other comment is refused as corrupt.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// Save writes the tensors to path as an .npz archive, members in sorted name order.
func Save(path string, tensors map[string]*Tensor) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	ts := make([]*Tensor, len(names))
	for i, n := range names {
		ts[i] = tensors[n]
	}
	return SaveOrdered(path, names, ts)
}

// SaveOrdered writes tensors[i] under names[i], in that order. Names must be non-empty
// and unique.
func SaveOrdered(path string, names []string, tensors []*Tensor) error {
	const op = "save"
	if len(names) != len(tensors) {
		return errorf(op, fmt.Sprintf("%s: %d names for %d tensors", path, len(names), len(tensors)))
	}
	arrays := make([]*npz.Array, len(names))
	for i, name := range names {
		a, err := toArray(name, tensors[i])
		if err != nil {
			msg := err.Error()
			if te, ok := err.(*Error); ok {
				msg = te.Msg
			}
			return &Error{Op: op, Msg: fmt.Sprintf("%s: tensor %q: %s", path, name, msg), err: err}
		}
		arrays[i] = a
	}
	seen := map[string]bool{}
	for _, a := range arrays {
		if a.Name == "" || seen[a.Name] || a.Name == npz.SealMember {
			return errorf(op, fmt.Sprintf("%s: array names must be non-empty, unique and not %q, got %q", path, npz.SealMember, a.Name))
		}
		seen[a.Name] = true
	}
	if err := npz.WriteFileSealed(path, arrays); err != nil {
		return &Error{Op: op, Msg: path + ": " + err.Error(), err: err}
	}
	return nil
}

// Load reads every array of an .npz archive (or a single .npy file) at path into new CPU
// tensors, owned by the current Scope if one is open.
func Load(path string) (map[string]*Tensor, error) {
	names, ts, err := LoadOrdered(path)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*Tensor, len(names))
	for i, n := range names {
		m[n] = ts[i]
	}
	return m, nil
}

// LoadOrdered is Load with the names and tensors in file order.
func LoadOrdered(path string) ([]string, []*Tensor, error) {
	const op = "load"
	arch, err := readVerified(path)
	if err != nil {
		return nil, nil, &Error{Op: op, Msg: err.Error(), err: err}
	}
	names := make([]string, len(arch.Arrays))
	ts := make([]*Tensor, len(arch.Arrays))
	for i, a := range arch.Arrays {
		t, err := fromArray(a)
		if err != nil {
			freeAll(ts[:i])
			return nil, nil, errorf(op, fmt.Sprintf("%s: array %q: %v", path, a.Name, err))
		}
		names[i], ts[i] = a.Name, t
	}
	return names, ts, nil
}

// readVerified reads an .npz archive (or a bare .npy file) and checks its seal when it
// has one. Errors name the file.
func readVerified(path string) (*npz.Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	arch, err := npz.Read(f, st.Size())
	if err != nil {
		var e *npz.Error
		if errors.As(err, &e) {
			e.File = path
			return nil, e
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch arch.Comment {
	case npz.SealComment: // written by Save
		if arch.Arrays, err = npz.Unseal(arch.Arrays); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case "": // NumPy's np.savez: the member CRCs are all there is
	default:
		return nil, fmt.Errorf("%s: unrecognised zip archive comment (corrupt file?)", path)
	}
	if len(arch.Arrays) == 1 && arch.Arrays[0].Name == "" {
		arch.Arrays[0].Name = strings.TrimSuffix(filepath.Base(path), ".npy")
	}
	return arch, nil
}

// toArray copies a tensor's values into an npz.Array.
func toArray(name string, t *Tensor) (*npz.Array, error) {
	if _, err := t.handle("save"); err != nil {
		return nil, err
	}
	shape := make([]int, t.Dim())
	for i, d := range t.Shape() {
		shape[i] = int(d)
	}
	var data any
	var err error
	switch dt := t.DType(); dt {
	case Float:
		data, err = t.Float32s()
	case Double:
		data, err = t.Float64s()
	case Long:
		data, err = t.Int64s()
	case Uint8:
		data, err = t.Uint8s()
	case Int:
		var v []int64
		if v, err = t.Int64s(); err == nil {
			w := make([]int32, len(v))
			for i, x := range v {
				w[i] = int32(x)
			}
			data = w
		}
	case Bool:
		var v []uint8
		if v, err = t.Uint8s(); err == nil {
			w := make([]bool, len(v))
			for i, x := range v {
				w[i] = x != 0
			}
			data = w
		}
	default:
		return nil, fmt.Errorf("dtype %s cannot be saved (supported: float32, float64, int32, int64, uint8, bool)", dt)
	}
	if err != nil {
		return nil, err
	}
	return npz.New(name, shape, data)
}

// fromArray creates a CPU tensor holding a copy of an array.
func fromArray(a *npz.Array) (*Tensor, error) {
	shape := make([]int64, len(a.Shape))
	for i, d := range a.Shape {
		shape[i] = int64(d)
	}
	switch v := a.Data.(type) {
	case []float32:
		return FromFloat32(v, shape...)
	case []float64:
		return FromFloat64(v, shape...)
	case []int64:
		return FromInt64(v, shape...)
	case []uint8:
		return FromUint8(v, shape...)
	case []int32:
		w := make([]int64, len(v))
		for i, x := range v {
			w[i] = int64(x)
		}
		return convertFrom(FromInt64(w, shape...))(Int)
	case []bool:
		w := make([]uint8, len(v))
		for i, x := range v {
			if x {
				w[i] = 1
			}
		}
		return convertFrom(FromUint8(w, shape...))(Bool)
	}
	return nil, fmt.Errorf("unsupported array dtype %s", a.DType)
}

// convertFrom converts a freshly created tensor to dt and frees the original.
func convertFrom(t *Tensor, err error) func(DType) (*Tensor, error) {
	return func(dt DType) (*Tensor, error) {
		if err != nil {
			return nil, err
		}
		defer t.Free()
		return t.ToDType(dt)
	}
}
