// Package checkpoint is the file format of ldtorch's checkpoints and their folder: naming,
// writing, reading and verifying, listing and pruning. What a checkpoint holds is the
// writer's business (labeldistill saves a distillation's whole state); this package knows
// only that a checkpoint is one self-verifying NumPy archive with a JSON member "meta".
//
// File: <dir>/ckpt-<step, 9 digits>.npz, an uncompressed NumPy archive (np.load reads it):
//
//	meta     uint8  JSON: at least {"format": "ldtorch-checkpoint", "version": 1}, then
//	                whatever the writer records
//	...             the writer's arrays
//	sha256   uint8  32 bytes: the seal, SHA-256 of every array above (npz.Seal)
//
// Integrity: the file is written to a temporary file in the same folder, fsynced and
// renamed (npz.WriteFile), so a crash leaves the previous checkpoints intact; on reading,
// the zip structure (a truncated file loses its central directory), each member's .npy
// header, and the SHA-256 over names, dtypes, shapes and values must all agree, so a
// flipped bit or a truncation is detected.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// The format's name and version, recorded in every meta.
const (
	Format  = "ldtorch-checkpoint"
	Version = 1
)

// DefaultKeep is how many of the newest checkpoints a run keeps.
const DefaultKeep = 3

const (
	prefix = "ckpt-"
	suffix = ".npz"
	// Pattern matches checkpoint file names (filepath.Match syntax).
	Pattern = prefix + "*" + suffix
)

// Name is the file name of the checkpoint taken after step meta-steps.
func Name(step int) string { return fmt.Sprintf("%s%09d%s", prefix, step, suffix) }

// stepOf parses a checkpoint file name; ok is false for any other name.
func stepOf(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, suffix)
	if !ok || s == "" {
		return 0, false
	}
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// header is the part of meta this package checks.
type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// File is a checkpoint read back and verified.
type File struct {
	Path   string
	meta   []byte
	arrays map[string]*npz.Array
}

// Array returns the member name, or an error naming the file when it is missing.
func (f *File) Array(name string) (*npz.Array, error) {
	a := f.arrays[name]
	if a == nil {
		return nil, fmt.Errorf("checkpoint %s: missing array %q", f.Path, name)
	}
	return a, nil
}

// Names lists the members of the checkpoint, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.arrays))
	for n := range f.arrays {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Meta decodes the meta JSON into v, refusing keys v does not have.
func (f *File) Meta(v any) error {
	dec := json.NewDecoder(bytes.NewReader(f.meta))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("checkpoint %s: meta: %v", f.Path, err)
	}
	return nil
}

// Write writes a checkpoint to path atomically: meta (marshalled to JSON; it must record
// Format and Version) first, then arrays, then the seal.
func Write(path string, meta any, arrays []*npz.Array) error {
	js, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("checkpoint: meta: %w", err)
	}
	m, err := npz.New("meta", []int{len(js)}, js)
	if err != nil {
		return fmt.Errorf("checkpoint: meta: %w", err)
	}
	sealed, err := npz.Seal(append([]*npz.Array{m}, arrays...))
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := npz.WriteFile(path, sealed); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Read reads and verifies one checkpoint file: the seal, a meta member of this format and
// version.
func Read(path string) (*File, error) {
	arc, err := npz.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s", path, fmt.Sprintf(format, args...))
	}
	arrays, err := npz.Unseal(arc.Arrays)
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(arrays) == 0 {
		return nil, bad("no arrays: not a complete checkpoint")
	}
	f := &File{Path: path, arrays: map[string]*npz.Array{}}
	for _, a := range arrays {
		f.arrays[a.Name] = a
	}
	meta := f.arrays["meta"]
	if meta == nil {
		return nil, bad("missing array %q", "meta")
	}
	js, ok := meta.Data.([]uint8)
	if !ok {
		return nil, bad("'meta' must be uint8 JSON, got %s", meta.DType)
	}
	f.meta = js
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, bad("meta: %v", err)
	}
	if h.Format != Format || h.Version != Version {
		return nil, bad("format %q version %d, want %q version %d", h.Format, h.Version, Format, Version)
	}
	return f, nil
}

// Files returns the checkpoint files (ckpt-<step>.npz) in dir, newest (highest step) first.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type ck struct {
		step int
		path string
	}
	var cks []ck
	for _, e := range entries {
		if step, ok := stepOf(e.Name()); ok && e.Type().IsRegular() {
			cks = append(cks, ck{step, filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(cks, func(a, b ck) int { return b.step - a.step })
	paths := make([]string, len(cks))
	for i, c := range cks {
		paths[i] = c.path
	}
	return paths, nil
}

// Prune removes all but the newest keep checkpoints in dir (keep < 1: none removed) and
// the temporary files an interrupted write may have left.
func Prune(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "."+prefix) && strings.Contains(e.Name(), ".tmp-") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if keep < 1 {
		return nil
	}
	paths, err := Files(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths[min(keep, len(paths)):] {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
