// Package boundedread reads whole files through a size bound, so that an endless or huge
// input (a FIFO fed forever, /dev/zero or /dev/urandom given as a file, a multi-gigabyte
// file under a familiar name) ends in an error naming the file and the bound instead of the
// Go runtime's out-of-memory crash.
//
// It sits beside torch/fileio/atomicfile and torch/fileio/npz, the file packages every layer can import
// (torch, labeldistill and its packages, cmd/ldtorch), and imports only the standard
// library.
package boundedread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// TooLargeError is a file (or stream) larger than the bound for its kind.
type TooLargeError struct {
	File  string // the path, or the name given for a stream
	What  string // the kind of file, singular: "image file", "config file"
	Limit int64  // the bound, in bytes
	Size  int64  // the file's size when known (a regular file), else -1
}

func (e *TooLargeError) Error() string { return e.File + ": " + e.Problem() }

// Problem is the message without the file's name (for callers that name it themselves).
func (e *TooLargeError) Problem() string {
	what := e.What
	if what == "" {
		what = "file"
	}
	if e.Size >= 0 {
		return fmt.Sprintf("%s, larger than the %s limit for %ss", Size(e.Size), Size(e.Limit), what)
	}
	return fmt.Sprintf("more than the %s limit for %ss (an endless stream, or a device given as a file?)", Size(e.Limit), what)
}

// Size writes a byte count for people: "512 bytes", "64 MiB", "1.5 GiB".
func Size(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d bytes", n)
	case n < k*k:
		return trimUnit(float64(n)/k, "KiB")
	case n < k*k*k:
		return trimUnit(float64(n)/(k*k), "MiB")
	}
	return trimUnit(float64(n)/(k*k*k), "GiB")
}

func trimUnit(v float64, unit string) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// ReadFile reads the named file whole when it holds at most limit bytes, else returns a
// *TooLargeError. what names the kind of file in that error ("image file"). A regular
// file's size is checked before reading; anything else (a pipe, a device) is read up to
// limit+1 bytes. Opening a named pipe waits for its writer, as os.ReadFile does.
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("is a folder, not a file")}
	}
	hint := int64(512)
	if st.Mode().IsRegular() {
		if st.Size() > limit {
			return nil, &TooLargeError{File: path, What: what, Limit: limit, Size: st.Size()}
		}
		hint = st.Size()
	}
	b, err := read(f, hint, limit)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.File, tl.What = path, what
		}
		return nil, err
	}
	return b, nil
}

// NotRegularError is a path that names something other than a regular file (a named
// pipe, a device, a socket) where only a regular file makes sense.
type NotRegularError struct {
	File string
	What string // the kind of file expected: "run history"
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	what := e.What
	if what == "" {
		what = "file"
	}
	return fmt.Sprintf("%s: is %s, not a regular file (a %s is a file ldtorch writes)", e.File, TypeName(e.Mode), what)
}

// TypeName says what a file mode's type is, for messages: "a named pipe", "a device".
func TypeName(m fs.FileMode) string {
	t := m.Type()
	switch {
	case t&fs.ModeDir != 0:
		return "a folder"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t == 0:
		return "a regular file"
	}
	return "a special file (" + t.String() + ")"
}

// ReadFileContext is ReadFile that gives up when ctx ends while it waits for the writer
// of a named pipe (opening one blocks until a writer comes, through signals: a command
// given a FIFO nobody writes to could not be interrupted). The open then left waiting is
// abandoned; the process is expected to end.
func ReadFileContext(ctx context.Context, path string, limit int64, what string) ([]byte, error) {
	if st, err := os.Stat(path); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		return ReadFile(path, limit, what)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := ReadFile(path, limit, what)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w while waiting for a writer to the named pipe", path, ctx.Err())
	}
}

// ReadRegularFile is ReadFile for the files ldtorch itself writes (reports, histories,
// summaries): anything but a regular file (a device or a pipe put in its place) is a
// *NotRegularError at once, without reading or waiting for a writer.
func ReadRegularFile(path string, limit int64, what string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return nil, &NotRegularError{File: path, What: what, Mode: st.Mode()}
	}
	return ReadFile(path, limit, what)
}

// ReadAll reads r whole when it yields at most limit bytes, else returns a *TooLargeError
// naming name.
func ReadAll(r io.Reader, name string, limit int64, what string) ([]byte, error) {
	b, err := read(r, 512, limit)
	if err != nil {
		var tl *TooLargeError
		if errors.As(err, &tl) {
			tl.File, tl.What = name, what
		}
		return nil, err
	}
	return b, nil
}

// read reads r to its end, at most limit bytes; hint sizes the first allocation.
func read(r io.Reader, hint, limit int64) ([]byte, error) {
	b := make([]byte, 0, min(hint, limit)+1) // +1: EOF is seen without growing
	for {
		if int64(len(b)) > limit {
			return nil, &TooLargeError{Limit: limit, Size: -1}
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow it
		}
		n, err := r.Read(b[len(b):min(int64(cap(b)), limit+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			if int64(len(b)) > limit {
				return nil, &TooLargeError{Limit: limit, Size: -1}
			}
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
