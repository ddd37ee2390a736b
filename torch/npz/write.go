// Writing .npz archives (stored or deflated) and .npy streams, with atomic file writes.

package npz

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes arrays as an .npz archive with stored (uncompressed) members, like
// np.savez. Array names must be non-empty and unique; each array is validated first.
func Write(w io.Writer, arrays []*Array) error { return write(w, arrays, zip.Store) }

// WriteCompressed writes arrays as an .npz archive with deflated members, like
// np.savez_compressed.
func WriteCompressed(w io.Writer, arrays []*Array) error { return write(w, arrays, zip.Deflate) }

// WriteFile atomically writes arrays to path as an .npz archive with stored members:
// temporary file in the same directory, fsync, rename, fsync of the directory.
func WriteFile(path string, arrays []*Array) error {
	return writeFile(path, func(w io.Writer) error { return write(w, arrays, zip.Store) })
}

// WriteFileCompressed is WriteFile with deflated members.
func WriteFileCompressed(path string, arrays []*Array) error {
	return writeFile(path, func(w io.Writer) error { return write(w, arrays, zip.Deflate) })
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

func write(w io.Writer, arrays []*Array, method uint16) error {
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
	if err := zw.Close(); err != nil {
		return &Error{Problem: "write failed", Err: err}
	}
	return nil
}

// writeFile writes path atomically through a temporary file in the same directory.
func writeFile(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return &Error{File: path, Problem: "cannot create temporary file", Err: err}
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = fill(tmp); err != nil {
		if e, ok := err.(*Error); ok {
			e.File = path
			return e
		}
		return &Error{File: path, Problem: "write failed", Err: err}
	}
	if err = tmp.Chmod(0o644); err != nil {
		return &Error{File: path, Problem: "chmod failed", Err: err}
	}
	if err = tmp.Sync(); err != nil {
		return &Error{File: path, Problem: "fsync failed", Err: err}
	}
	if err = tmp.Close(); err != nil {
		return &Error{File: path, Problem: "close failed", Err: err}
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return &Error{File: path, Problem: "rename failed", Err: err}
	}
	// Make the rename durable; some filesystems refuse to fsync a directory, which is
	// not an error worth failing the write for.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
