// Writing .npz archives (stored or deflated) and .npy streams, with atomic file writes.

package npz

import (
	"archive/zip"
	"fmt"
	"io"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// Write writes arrays as an .npz archive with stored (uncompressed) members, like
// np.savez. Array names must be non-empty and unique; each array is validated first.
func Write(w io.Writer, arrays []*Array) error { return write(w, arrays, zip.Store, "") }

// WriteCompressed writes arrays as an .npz archive with deflated members, like
// np.savez_compressed.
func WriteCompressed(w io.Writer, arrays []*Array) error { return write(w, arrays, zip.Deflate, "") }

// WriteFile atomically writes arrays to path as an .npz archive with stored members:
// temporary file in the same directory, fsync, rename, fsync of the directory.
func WriteFile(path string, arrays []*Array) error {
	return writeFile(path, func(w io.Writer) error { return write(w, arrays, zip.Store, "") })
}

// WriteFileCompressed is WriteFile with deflated members.
func WriteFileCompressed(path string, arrays []*Array) error {
	return writeFile(path, func(w io.Writer) error { return write(w, arrays, zip.Deflate, "") })
}

// WriteNPY writes one array as a bare .npy stream (its Name is not stored).
func WriteNPY(w io.Writer, a *Array) error {
	if err := a.validate(); err != nil {
		return &Error{Member: a.Name, Problem: err.Error()}
	}
	if err := writeNPY(w, a); err != nil {
		return &Error{Member: a.Name, Problem: "write failed", Err: err}
	}
	return nil
}

func validateAll(arrays []*Array) error {
	seen := map[string]bool{}
	for i, a := range arrays {
		if a == nil {
			return &Error{Problem: fmt.Sprintf("array %d is nil", i)}
		}
		if a.Name == "" {
			return &Error{Problem: fmt.Sprintf("array %d has an empty name", i)}
		}
		if seen[a.Name] {
			return &Error{Member: a.Name + ".npy", Problem: fmt.Sprintf("duplicate array name %q", a.Name)}
		}
		seen[a.Name] = true
		if err := a.validate(); err != nil {
			return &Error{Member: a.Name + ".npy", Problem: err.Error()}
		}
	}
	return nil
}

func write(w io.Writer, arrays []*Array, method uint16, comment string) error {
	if err := validateAll(arrays); err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, a := range arrays {
		m := a.Name + ".npy"
		fh := &zip.FileHeader{
			Name:         m,
			Method:       method,
			ModifiedDate: 1<<5 | 1, // 1980-01-01, as NumPy writes it
		}
		fw, err := zw.CreateHeader(fh)
		if err != nil {
			return &Error{Member: m, Problem: "write failed", Err: err}
		}
		if err := writeNPY(fw, a); err != nil {
			return &Error{Member: m, Problem: "write failed", Err: err}
		}
	}
	if err := zw.SetComment(comment); err != nil {
		return &Error{Problem: "write failed", Err: err}
	}
	if err := zw.Close(); err != nil {
		return &Error{Problem: "write failed", Err: err}
	}
	return nil
}

// writeFile writes path atomically (see atomicfile.Write), every error an *Error naming
// path.
func writeFile(path string, fill func(io.Writer) error) error {
	err := atomicfile.Write(path, fill)
	switch e := err.(type) {
	case nil:
		return nil
	case *Error: // from fill
		e.File = path
		return e
	case *atomicfile.Error:
		if e.Step == "create" {
			return &Error{File: path, Problem: "cannot create temporary file", Err: e.Err}
		}
		return &Error{File: path, Problem: e.Step + " failed", Err: e.Err}
	}
	return &Error{File: path, Problem: "write failed", Err: err}
}
