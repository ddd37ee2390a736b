package boundedread

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{5, 6, 1 << 20} {
		if b, err := ReadFile(small, limit, "test file"); err != nil || string(b) != "hello" {
			t.Errorf("limit %d: %q, %v", limit, b, err)
		}
	}
	_, err := ReadFile(small, 4, "test file")
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.File != small || tl.Limit != 4 || tl.Size != 5 ||
		err.Error() != small+": 5 bytes, larger than the 4 bytes limit for test files" {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFile(dir, 10, "test file"); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("a folder: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 10, "test file"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if b, err := ReadFile(empty, 0, "test file"); err != nil || len(b) != 0 {
		t.Errorf("empty file, limit 0: %q, %v", b, err)
	}
}

// An endless device ends at the bound, in an error that says so.
func TestReadFileEndless(t *testing.T) {
	start := time.Now()
	_, err := ReadFile("/dev/zero", 8<<20, "image file")
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != -1 || !strings.Contains(err.Error(), "/dev/zero: more than the 8 MiB limit for image files") {
		t.Fatalf("/dev/zero: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}

// A named pipe fed without end, and one fed a little.
func TestReadFileFIFO(t *testing.T) {
	for _, endless := range []bool{true, false} {
		p := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skipf("no named pipes: %v", err)
		}
		go func() {
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer w.Close()
			chunk := bytes.Repeat([]byte("x"), 1<<16)
			for i := 0; endless || i < 2; i++ {
				if _, err := w.Write(chunk); err != nil {
					return // the reader gave up
				}
			}
		}()
		b, err := ReadFile(p, 1<<20, "config file")
		switch {
		case endless && (err == nil || !strings.Contains(err.Error(), "more than the 1 MiB limit for config files")):
			t.Errorf("endless pipe: %v", err)
		case !endless && (err != nil || len(b) != 2<<16):
			t.Errorf("pipe of 128 KiB: %d bytes, %v", len(b), err)
		}
	}
}

func TestReadAll(t *testing.T) {
	if b, err := ReadAll(strings.NewReader("abc"), "stdin", 3, "list"); err != nil || string(b) != "abc" {
		t.Errorf("%q %v", b, err)
	}
	if _, err := ReadAll(strings.NewReader("abcd"), "stdin", 3, "list"); err == nil || err.Error() != "stdin: more than the 3 bytes limit for lists (an endless stream, or a device given as a file?)" {
		t.Errorf("%v", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 20: "64 MiB", 3 << 30: "3 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestReadRegularFile: a file ldtorch writes, replaced by a device or a pipe, is refused
// at once, without reading it or waiting for a writer.
func TestReadRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	for path, want := range map[string]string{"/dev/zero": "is a device", fifo: "is a named pipe"} {
		done := make(chan error, 1)
		go func() { _, err := ReadRegularFile(path, 1<<30, "run history"); done <- err }()
		select {
		case err := <-done:
			var nr *NotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "run history") {
				t.Errorf("%s: %v", path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", path)
		}
	}
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("ok"), 0o644)
	if b, err := ReadRegularFile(small, 10, "run history"); err != nil || string(b) != "ok" {
		t.Errorf("a regular file: %q, %v", b, err)
	}
}
