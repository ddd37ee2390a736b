// Package atomicfile replaces files atomically, for every file ldtorch writes: the new
// content goes to a temporary file in the destination's folder, which is fsynced, closed
// and renamed over the destination (then the folder is fsynced), so a reader or a crash
// sees the old file or the new one, never a mix.
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Error is a failure of one of Write's own steps (not of its fill function).
//
// Its message is Err's: the os errors already name the file (the temporary file, or both
// names of a rename) and the operation, and callers add the destination themselves. Step
// lets a caller word the failure in its own terms.
type Error struct {
	Step string // "create" (the temporary file), "chmod", "fsync", "close" or "rename"
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Write creates or replaces path with the bytes fill writes. The temporary file is named
// "." + base(path) + ".tmp-<random>" (checkpoint pruning recognises leftovers of
// interrupted writes by that name) and is removed on any error, leaving path untouched.
// The file gets mode 0644.
//
// An error from fill is returned unchanged, so callers can match their own error types;
// fill can also reject what it wrote (a checksum mismatch, say) to abort the write. Any
// other failure is an *Error.
func Write(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return &Error{Step: "create", Err: err}
	}
	defer func() {
		if err != nil {
			tmp.Close() // a second Close after a failed one is harmless
			os.Remove(tmp.Name())
		}
	}()
	if err = fill(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil { // CreateTemp makes 0600 files
		return &Error{Step: "chmod", Err: err}
	}
	if err = tmp.Sync(); err != nil {
		return &Error{Step: "fsync", Err: err}
	}
	if err = tmp.Close(); err != nil {
		return &Error{Step: "close", Err: err}
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return &Error{Step: "rename", Err: err}
	}
	// Make the rename durable; some filesystems refuse to fsync a folder, which is not
	// worth failing a write that has already happened.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteFile is Write for bytes held in memory.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFiles replaces several files (paths[i] with data[i]) as one write as far as the
// file system allows: every file's new content is written and synced to a temporary file
// beside it first, and each destination checked not to be a folder, before any is renamed
// over its destination, in order. A failure before the renames (a full disk, an unwritable
// folder) removes the temporary files and leaves every destination as it was; only a
// failing rename, which needs no space, can leave the first files replaced.
func WriteFiles(paths []string, data [][]byte) (err error) {
	if len(paths) != len(data) {
		return errors.New("atomicfile: WriteFiles: as many contents as paths are needed")
	}
	tmps := make([]string, 0, len(paths))
	defer func() {
		if err != nil {
			for _, t := range tmps {
				os.Remove(t)
			}
		}
	}()
	for i, path := range paths {
		tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
		if err != nil {
			return &Error{Step: "create", Err: err}
		}
		tmps = append(tmps, tmp.Name())
		_, werr := tmp.Write(data[i])
		if werr == nil {
			if werr = tmp.Chmod(0o644); werr != nil {
				werr = &Error{Step: "chmod", Err: werr}
			}
		}
		if werr == nil {
			if werr = tmp.Sync(); werr != nil {
				werr = &Error{Step: "fsync", Err: werr}
			}
		}
		if cerr := tmp.Close(); werr == nil && cerr != nil {
			werr = &Error{Step: "close", Err: cerr}
		}
		if werr != nil {
			return werr
		}
	}
	for _, path := range paths {
		if st, err := os.Lstat(path); err == nil && st.IsDir() {
			return &Error{Step: "rename", Err: &os.PathError{Op: "replace", Path: path, Err: errors.New("is a folder")}}
		}
	}
	for i, path := range paths {
		if err := os.Rename(tmps[i], path); err != nil {
			tmps = tmps[i:] // the renamed ones are in place
			return &Error{Step: "rename", Err: err}
		}
	}
	for _, dir := range uniqueDirs(paths) {
		if d, derr := os.Open(dir); derr == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// uniqueDirs are the folders of paths, each once, in order.
func uniqueDirs(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if d := filepath.Dir(p); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// EnsureWritableDir creates dir if needed and proves it writable: a probe file is written,
// synced and removed, so that an unusable output folder fails before any work starts.
func EnsureWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ldtorch-probe-*")
	if err != nil {
		return err
	}
	_, werr := f.WriteString("probe\n")
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	return errors.Join(werr, serr, cerr, rerr)
}
