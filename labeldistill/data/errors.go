// Typed errors for malformed data files, unknown checksums and missing datasets.

package data

import (
	"fmt"
	"io/fs"
	"strings"
)

// FormatError reports a data file that is malformed, truncated or inconsistent (wrong
// magic, counts that disagree with the file size, labels out of range, an undecodable
// image, an empty class folder, ...). File names the file (for an archive member,
// "archive.tar.gz:member"); Problem says what is wrong.
type FormatError struct {
	File    string
	Problem string
	Err     error // underlying error (gzip, image decoder, npz), if any
}

func (e *FormatError) Error() string {
	s := "data: " + e.File + ": " + e.Problem
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(file, format string, args ...any) *FormatError {
	return &FormatError{File: file, Problem: fmt.Sprintf(format, args...)}
}

// ChecksumError reports a file whose sha256 (of its bytes, and of its decompressed
// content when it is gzip) is not one the registry knows for that file. Load returns it
// unless Options.AllowUnknown is set, in which case it becomes a warning.
type ChecksumError struct {
	Dataset string
	File    string
	SHA256  string   // of the file's bytes
	Content string   // of the decompressed content ("" when not compressed)
	Known   []string // the sha256 values the registry accepts for this file
}

func (e *ChecksumError) Error() string {
	if e.SHA256 == "" {
		return fmt.Sprintf("data: %s: %s: image folders cannot be checksummed (to read them anyway: allow_unknown_data)", e.Dataset, e.File)
	}
	s := fmt.Sprintf("data: %s: %s: unknown sha256 %s", e.Dataset, e.File, e.SHA256)
	if e.Content != "" {
		s += fmt.Sprintf(" (content %s)", e.Content)
	}
	if len(e.Known) == 0 {
		s += "; the registry knows no checksum for this file"
	} else {
		s += "; known: " + strings.Join(e.Known, ", ")
	}
	return s + " (" + acceptHint + ")"
}

// acceptHint ends a ChecksumError's message: the setting that accepts the file (a config
// key; the command line words it as its flag).
const acceptHint = "to accept it: allow_unknown_data"

// MissingError reports that a dataset's files are not present. It matches
// fs.ErrNotExist under errors.Is.
type MissingError struct {
	Dataset string
	Dir     string
	Missing []string // what the first (preferred) layout lacks
	Hint    string   // how to obtain the files
}

func (e *MissingError) Error() string {
	s := fmt.Sprintf("data: %s: files not found in %s (missing %s)", e.Dataset, e.Dir, strings.Join(e.Missing, ", "))
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

func (e *MissingError) Unwrap() error { return fs.ErrNotExist }
