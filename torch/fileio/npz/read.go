// Reading .npz archives and .npy files from disk or from an io.ReaderAt.

package npz

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxDeflateRatio bounds how much a deflate stream can expand (the format's limit is
// about 1032:1); a member declaring more is rejected before anything is allocated.
const maxDeflateRatio = 1032

// ReadFile reads an .npz archive or a bare .npy file (detected by its magic bytes). The
// arrays come back in file order; an .npy file yields one array named after the file
// (its base name without ".npy"). Errors are *Error values naming path and member.
func ReadFile(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Problem: "cannot open", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Problem: "cannot stat", Err: err}
	}
	a, err := Read(f, st.Size())
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.File = path
		}
		return nil, err
	}
	if len(a.Arrays) == 1 && a.Arrays[0].Name == "" {
		a.Arrays[0].Name = strings.TrimSuffix(filepath.Base(path), ".npy")
	}
	return a, nil
}

// Read reads an .npz archive or a bare .npy stream of the given size from r. A bare
// .npy stream yields one array with an empty Name.
func Read(r io.ReaderAt, size int64) (*Archive, error) {
	var magic [6]byte
	n, _ := r.ReadAt(magic[:], 0)
	switch {
	case n >= 4 && (string(magic[:4]) == "PK\x03\x04" || string(magic[:4]) == "PK\x05\x06"):
		return readZip(r, size)
	case n == 6 && string(magic[:]) == npyMagic:
		arr, err := readNPY(io.NewSectionReader(r, 0, size), size)
		if err != nil {
			return nil, asError("", err)
		}
		return &Archive{Arrays: []*Array{arr}}, nil
	}
	return nil, &Error{Problem: fmt.Sprintf("bad magic %q: neither an .npz (zip) archive nor an .npy file", magic[:n])}
}

// ReadNPY reads one .npy stream of unknown length from r (memory grows with the bytes
// actually read). The returned array has an empty Name.
func ReadNPY(r io.Reader) (*Array, error) {
	arr, err := readNPY(r, -1)
	if err != nil {
		return nil, asError("", err)
	}
	return arr, nil
}

// asError wraps a problem in an *Error for the given member.
func asError(member string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var p *problem
	if errors.As(err, &p) {
		return &Error{Member: member, Problem: p.msg, Err: p.err}
	}
	return &Error{Member: member, Problem: "read failed", Err: err}
}

func readZip(r io.ReaderAt, size int64) (*Archive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, &Error{Problem: "not a valid zip archive", Err: err}
	}
	a := &Archive{Comment: zr.Comment}
	seen := map[string]bool{}
	for _, f := range zr.File {
		m := f.Name
		if strings.HasSuffix(m, "/") {
			return nil, &Error{Member: m, Problem: "directories are not allowed in an .npz archive"}
		}
		name := strings.TrimSuffix(m, ".npy")
		if name == "" {
			return nil, &Error{Member: m, Problem: "empty array name"}
		}
		if seen[name] {
			return nil, &Error{Member: m, Problem: fmt.Sprintf("duplicate array name %q", name)}
		}
		seen[name] = true
		if f.Flags&1 != 0 {
			return nil, &Error{Member: m, Problem: "encrypted members are not supported"}
		}
		comp, uncomp := f.CompressedSize64, f.UncompressedSize64
		switch f.Method {
		case zip.Store:
			if comp != uncomp {
				return nil, &Error{Member: m, Problem: fmt.Sprintf("stored member with compressed size %d != uncompressed size %d", comp, uncomp)}
			}
		case zip.Deflate:
			if uncomp/maxDeflateRatio > comp+64 {
				return nil, &Error{Member: m, Problem: fmt.Sprintf("declares %d uncompressed bytes, more than %d deflated bytes can hold", uncomp, comp)}
			}
		default:
			return nil, &Error{Member: m, Problem: fmt.Sprintf("unsupported zip compression method %d (only stored and deflated)", f.Method)}
		}
		if comp > uint64(size) {
			return nil, &Error{Member: m, Problem: fmt.Sprintf("compressed size %d goes beyond the end of the file (%d bytes)", comp, size)}
		}
		if uncomp > uint64(maxBytes) {
			return nil, &Error{Member: m, Problem: fmt.Sprintf("uncompressed size %d is too large", uncomp)}
		}
		rc, err := f.Open()
		if err != nil {
			return nil, &Error{Member: m, Problem: "cannot open member", Err: err}
		}
		arr, err := readNPY(rc, int64(uncomp))
		rc.Close()
		if err != nil {
			return nil, asError(m, err)
		}
		arr.Name = name
		a.Arrays = append(a.Arrays, arr)
	}
	return a, nil
}
