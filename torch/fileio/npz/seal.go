package npz

// seal.go: the one integrity scheme of the .npz files ldtorch writes for itself
// (checkpoints). The zip CRC-32s of ReadFile catch damaged bytes; the seal also catches a
// file that is a valid archive but not what was written: a renamed, dropped, reordered or
// truncated-and-rewritten member. It is a last member, "sha256", a 32-byte uint8 array (NumPy
// reads it like any other) holding the SHA-256 over every other member, in order: its name,
// dtype and shape (length-prefixed, little-endian) and its values in little-endian order.
// Artifacts (distilled.npz) are NumPy-first files without a seal; report.json records
// their SHA-256.

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
)

// SealMember is the name of the seal, the last member of a sealed archive.
const SealMember = "sha256"

// SealComment is the zip comment of the files WriteFileSealed writes, so that a reader
// that also takes NumPy's unsealed files knows the seal is required (NumPy ignores it).
const SealComment = "ldtorch sealed npz"

// WriteFileSealed writes arrays and their seal to path (atomically, as WriteFile), with
// SealComment as the archive comment.
func WriteFileSealed(path string, arrays []*Array) error {
	sealed, err := Seal(arrays)
	if err != nil {
		return &Error{File: path, Problem: "write failed", Err: err}
	}
	return writeFile(path, func(w io.Writer) error { return write(w, sealed, zip.Store, SealComment) })
}

// Seal returns arrays followed by their seal.
func Seal(arrays []*Array) ([]*Array, error) {
	sum, err := digest(arrays)
	if err != nil {
		return nil, err
	}
	seal, err := New(SealMember, []int{len(sum)}, sum)
	if err != nil {
		return nil, err
	}
	return append(append([]*Array{}, arrays...), seal), nil
}

// Unseal checks the seal at the end of arrays and returns the arrays before it.
func Unseal(arrays []*Array) ([]*Array, error) {
	n := len(arrays)
	if n < 1 || arrays[n-1].Name != SealMember {
		return nil, fmt.Errorf("no %q member at the end: not a complete sealed archive", SealMember)
	}
	stored, ok := arrays[n-1].Data.([]uint8)
	if !ok || len(stored) != sha256.Size {
		return nil, fmt.Errorf("malformed %q member", SealMember)
	}
	sum, err := digest(arrays[:n-1])
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(sum, stored) {
		return nil, fmt.Errorf("SHA-256 mismatch (stored %x, computed %x): the file is corrupt", stored, sum)
	}
	return arrays[:n-1], nil
}

// digest is the seal's SHA-256 over arrays.
func digest(arrays []*Array) ([]byte, error) {
	h := sha256.New()
	var buf [8]byte
	putInt := func(v int) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	putString := func(s string) {
		putInt(len(s))
		h.Write([]byte(s))
	}
	for _, a := range arrays {
		putString(a.Name)
		putString(a.DType)
		putInt(len(a.Shape))
		for _, d := range a.Shape {
			putInt(d)
		}
		if err := hashValues(h, a.Data); err != nil {
			return nil, fmt.Errorf("array %q: %w", a.Name, err)
		}
	}
	return h.Sum(nil), nil
}

func hashValues(h hash.Hash, data any) error {
	switch d := data.(type) {
	case []uint8:
		h.Write(d)
	case []bool:
		b := make([]byte, len(d))
		for i, v := range d {
			if v {
				b[i] = 1
			}
		}
		h.Write(b)
	case []float32:
		hashChunks(h, d)
	case []float64:
		hashChunks(h, d)
	case []int32:
		hashChunks(h, d)
	case []int64:
		hashChunks(h, d)
	default:
		return fmt.Errorf("unsupported element type %T", data)
	}
	return nil
}

// hashChunks writes d little-endian in chunks, keeping the temporary buffer small.
func hashChunks[T float32 | float64 | int32 | int64](h hash.Hash, d []T) {
	const chunk = 1 << 16
	for i := 0; i < len(d); i += chunk {
		binary.Write(h, binary.LittleEndian, d[i:min(i+chunk, len(d))])
	}
}
