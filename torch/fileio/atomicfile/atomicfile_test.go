package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// wantContent checks path's content and that dir holds nothing but want entries.
func wantContent(t *testing.T, path, content string, dirEntries int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", path, b, content)
	}
	if names := entries(t, filepath.Dir(path)); len(names) != dirEntries {
		t.Errorf("folder holds %v, want %d entries (temporary file left?)", names, dirEntries)
	}
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	if err := WriteFile(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	wantContent(t, path, "first", 1)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	err = Write(path, func(w io.Writer) error {
		_, err := io.WriteString(w, "second, longer")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantContent(t, path, "second, longer", 1)
}

func TestWriteFillErrorKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.npz")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	errFill := errors.New("checksum mismatch")
	var tmpName string
	err := Write(path, func(w io.Writer) error {
		tmpName = w.(*os.File).Name()
		io.WriteString(w, "half-written new content")
		return errFill
	})
	if err != errFill {
		t.Fatalf("got %v, want fill's error unchanged", err)
	}
	if base := filepath.Base(tmpName); !strings.HasPrefix(base, ".a.npz.tmp-") || filepath.Dir(tmpName) != dir {
		t.Errorf("temporary file %s, want %s/.a.npz.tmp-*", tmpName, dir)
	}
	wantContent(t, path, "old", 1)
}

func TestWriteStepErrors(t *testing.T) {
	dir := t.TempDir()
	// The folder does not exist: the temporary file cannot be created.
	missing := filepath.Join(dir, "no-such-folder", "x.json")
	err := WriteFile(missing, []byte("x"))
	var e *Error
	if !errors.As(err, &e) || e.Step != "create" || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "x.json.tmp-") {
		t.Errorf("missing folder: got %v (%T), want a create *Error naming the file", err, err)
	}
	// The destination is a non-empty folder: the rename fails after the temporary file
	// was written and closed, and the temporary file is removed.
	dest := filepath.Join(dir, "dest")
	if err := os.MkdirAll(filepath.Join(dest, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = WriteFile(dest, []byte("x"))
	if !errors.As(err, &e) || e.Step != "rename" || !strings.Contains(err.Error(), dest) {
		t.Errorf("rename over a folder: got %v (%T), want a rename *Error naming %s", err, err, dest)
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "dest" {
		t.Errorf("folder holds %v, want only dest (temporary file left?)", names)
	}
}

// WriteFiles replaces every file or none: a failure to write a later file (its folder
// gone, its destination a folder) leaves the earlier ones as they were and no temporary
// file behind.
func TestWriteFilesAllOrNone(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFiles([]string{a, filepath.Join(dir, "gone", "c")}, [][]byte{[]byte("new"), []byte("new")}); err == nil {
		t.Fatal("a file in a missing folder: no error")
	}
	wantContent(t, a, "old", 2)

	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFiles([]string{a, b, sub}, [][]byte{[]byte("new"), []byte("new"), []byte("new")})
	var e *Error
	if !errors.As(err, &e) || e.Step != "rename" || !strings.Contains(err.Error(), sub+": is a folder") {
		t.Fatalf("a folder as a destination: %v", err)
	}
	wantContent(t, a, "old", 3)
	wantContent(t, b, "old", 3)

	if err := WriteFiles([]string{a, b}, [][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatal(err)
	}
	wantContent(t, a, "one", 3)
	wantContent(t, b, "two", 3)
	if err := WriteFiles([]string{a}, nil); err == nil {
		t.Error("one path, no content: no error")
	}
}
