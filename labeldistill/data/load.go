// Loading a registered dataset: locate its folder and files, verify checksums, read,
// split and normalise.

package data

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DataDir resolves the data cache folder: explicit if non-empty, else $LDTORCH_DATA,
// else $XDG_CACHE_HOME/ldtorch/data, else ~/.cache/ldtorch/data. Each dataset lives in
// a sub-folder named after it (e.g. <DataDir>/mnist). Data never lives in the repository.
func DataDir(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if d := os.Getenv("LDTORCH_DATA"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ldtorch", "data"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("data: cannot find the data folder (set LDTORCH_DATA): %w", err)
	}
	return filepath.Join(home, ".cache", "ldtorch", "data"), nil
}

// Options control Load.
type Options struct {
	// DataDir is the data cache folder (see DataDir); the dataset is read from
	// <DataDir>/<name>.
	DataDir string
	// Dir, when set, is the folder holding this dataset's files directly; it overrides
	// DataDir.
	Dir string
	// Seed drives the train → target/validation permutation.
	Seed uint64
	// TargetSetSize subsamples the target set (0 = all); see SplitOptions.
	TargetSetSize int
	// ValidationSize overrides the registry's validation size when > 0.
	ValidationSize int
	// AllowUnknown accepts files whose checksum the registry does not know (and image
	// folders, which cannot be checksummed); each one is reported in
	// Dataset.Warnings. Without it such files are a *ChecksumError.
	AllowUnknown bool
	// Transpose transposes every image (rows ↔ columns). EMNIST letters are stored
	// transposed relative to MNIST; the reference, and the default here, use them as
	// stored.
	Transpose bool
	// Image controls decoding of image archives and folders (cifar10 JPEG, cub).
	Image ImageOptions
	// Context, when set, ends the load early once it is done (a signal): between files,
	// and between the images of an archive or folder; the load returns its error.
	Context context.Context
}

// stopped is the error of o's context once it is done, else nil.
func (o ImageOptions) stopped() error {
	if o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

// located is a layout whose files were all found.
type located struct {
	layout *Layout
	paths  []string // per layout.Files entry; "" for an absent optional file
}

// datasetDir returns the folder of a dataset.
func datasetDir(name string, opt Options) (string, error) {
	if opt.Dir != "" {
		return opt.Dir, nil
	}
	root, err := DataDir(opt.DataDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, name), nil
}

// locate returns the first layout of spec whose required files are all in dir.
func locate(spec *Spec, dir string) (*located, error) {
	var firstMissing []string
	for li := range spec.Layouts {
		l := &spec.Layouts[li]
		loc := &located{layout: l, paths: make([]string, len(l.Files))}
		var missing []string
		for i, f := range l.Files {
			for _, n := range f.Names {
				p := filepath.Join(dir, filepath.FromSlash(n))
				if st, err := os.Stat(p); err == nil && st.IsDir() == f.Dir {
					loc.paths[i] = p
					break
				}
			}
			if loc.paths[i] == "" && !f.Optional {
				missing = append(missing, f.Names[0])
			}
		}
		if len(missing) == 0 {
			return loc, nil
		}
		if li == 0 {
			firstMissing = missing
		}
	}
	return nil, &MissingError{Dataset: spec.Name, Dir: dir, Missing: firstMissing, Hint: spec.Obtain}
}

// loader carries the state of one Load.
type loader struct {
	spec     *Spec
	opt      Options
	warnings []string
}

// verify checks a file's checksum against the registry.
func (ld *loader) verify(f *FileSpec, b *blob) error {
	if f.knownSum(b.sha) {
		return nil
	}
	content, err := b.contentSHA()
	if err != nil {
		return err
	}
	if f.knownSum(content) {
		return nil
	}
	cerr := &ChecksumError{Dataset: ld.spec.Name, File: b.path, SHA256: b.sha, Content: content, Known: f.SHA256}
	if !ld.opt.AllowUnknown {
		return cerr
	}
	ld.warnings = append(ld.warnings, strings.TrimSuffix(cerr.Error(), " ("+acceptHint+")")+" (accepted: allow_unknown_data)")
	return nil
}

// read reads and verifies the file of a role (the n-th one of that role).
func (ld *loader) read(loc *located, role Role, n int) (*blob, error) {
	for i := range loc.layout.Files {
		f := &loc.layout.Files[i]
		if f.Role != role {
			continue
		}
		if n > 0 {
			n--
			continue
		}
		if err := ld.opt.Image.stopped(); err != nil {
			return nil, err
		}
		b, err := readFileHashed(loc.paths[i])
		if err != nil {
			return nil, err
		}
		if err := ld.verify(f, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("data: internal: layout %s has no %s file", loc.layout.Name, role)
}

func (ld *loader) content(loc *located, role Role, n int) (string, []byte, error) {
	b, err := ld.read(loc, role, n)
	if err != nil {
		return "", nil, err
	}
	c, err := b.content()
	return b.path, c, err
}

// Load reads the named dataset (see Names) and returns its target set, validation and
// test splits, normalised. Files are looked up in opt.Dir, else <DataDir>/<name>.
// Errors: *MissingError (files absent; errors.Is fs.ErrNotExist), *ChecksumError
// (unknown checksum without AllowUnknown), *FormatError (malformed file).
func Load(name string, opt Options) (*Dataset, error) {
	raw, err := LoadRaw(name, opt)
	if err != nil {
		return nil, err
	}
	return raw.Split(SplitOptions{Seed: opt.Seed, TargetSetSize: opt.TargetSetSize, ValidationSize: opt.ValidationSize})
}

// RawData is a dataset's train and test data as stored (uint8), before splitting.
type RawData struct {
	Spec        *Spec
	Train, Test *RawSet
	Layout      string   // the registry layout that was read
	Dir         string   // the dataset folder
	Files       []string // the files read
	Warnings    []string
}

// Split splits and normalises the data (NewDataset), keeping where it came from and the
// warnings of reading it: Load is LoadRaw then Split.
func (r *RawData) Split(opt SplitOptions) (*Dataset, error) {
	ds, err := NewDataset(r.Spec, r.Train, r.Test, opt)
	if err != nil {
		return nil, err
	}
	ds.Layout, ds.Dir, ds.Files = r.Layout, r.Dir, r.Files
	ds.Warnings = append(r.Warnings, ds.Warnings...)
	return ds, nil
}

// LoadRaw locates, verifies and reads a dataset's train and test files as uint8
// RawSets (Load without the split and normalisation).
func LoadRaw(name string, opt Options) (*RawData, error) {
	spec, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	dir, err := datasetDir(name, opt)
	if err != nil {
		return nil, err
	}
	loc, err := locate(spec, dir)
	if err != nil {
		return nil, err
	}
	rd := &RawData{Spec: spec, Layout: loc.layout.Name, Dir: dir}
	for _, p := range loc.paths {
		if p != "" {
			rd.Files = append(rd.Files, p)
		}
	}
	rd.Train, rd.Test, rd.Warnings, err = readLayout(spec, dir, loc, opt)
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// readLayout reads and verifies the files of a located layout.
func readLayout(spec *Spec, dir string, loc *located, opt Options) (train, test *RawSet, warnings []string, err error) {
	if opt.Image.Context == nil {
		opt.Image.Context = opt.Context
	}
	ld := &loader{spec: spec, opt: opt}
	l := loc.layout
	if l.Note != "" {
		ld.warnings = append(ld.warnings, l.Note)
	}
	switch l.Format {
	case FormatIDX, FormatNPZ:
		var c [4][]byte
		var p [4]string
		for i, role := range []Role{RoleTrainImages, RoleTrainLabels, RoleTestImages, RoleTestLabels} {
			if p[i], c[i], err = ld.content(loc, role, 0); err != nil {
				return
			}
		}
		if l.Format == FormatIDX {
			o := IDXOptions{Classes: spec.Classes, LabelOffset: spec.LabelOffset, H: spec.H, W: spec.W}
			if train, err = decodeIDXPair(p[0], c[0], p[1], c[1], o); err != nil {
				return
			}
			test, err = decodeIDXPair(p[2], c[2], p[3], c[3], o)
		} else {
			if train, err = decodeK49(p[0], c[0], p[1], c[1], spec.Classes); err != nil {
				return
			}
			test, err = decodeK49(p[2], c[2], p[3], c[3], spec.Classes)
		}
	case FormatCIFAR10, FormatCIFAR100:
		fine := l.Format == FormatCIFAR100
		readAll := func(role Role) (*RawSet, error) {
			var parts []*RawSet
			for k := range countRole(l, role) {
				name, c, err := ld.content(loc, role, k)
				if err != nil {
					return nil, err
				}
				r, err := decodeCIFAR(name, c, fine)
				if err != nil {
					return nil, err
				}
				parts = append(parts, r)
			}
			return concatRaw(parts), nil
		}
		if train, err = readAll(RoleTrain); err != nil {
			return
		}
		test, err = readAll(RoleTest)
	case FormatImageTar:
		var b *blob
		if b, err = ld.read(loc, RoleArchive, 0); err != nil {
			return
		}
		imgOpt := opt.Image
		if imgOpt.Classes == nil {
			imgOpt.Classes = spec.ClassNames
			for i, f := range l.Files {
				if f.Role == RoleClassNames && loc.paths[i] != "" {
					var cb *blob
					if cb, err = ld.read(loc, RoleClassNames, 0); err != nil {
						return
					}
					if imgOpt.Classes, err = parseClassNames(cb.path, cb.file); err != nil {
						return
					}
				}
			}
		}
		var sets []*ImageSet
		if sets, err = decodeImageTar(b, []string{l.TrainPrefix, l.TestPrefix}, imgOpt); err != nil {
			return
		}
		train, test = sets[0].Raw, sets[1].Raw
	case FormatImageFolder:
		if !opt.AllowUnknown {
			err = &ChecksumError{Dataset: spec.Name, File: dir}
			return
		}
		ld.warnings = append(ld.warnings, spec.Name+": image folders are not checksummed (accepted: allow_unknown_data)")
		var sets [2]*ImageSet
		for i, role := range []Role{RoleTrain, RoleTest} {
			for j, f := range l.Files {
				if f.Role == role {
					if sets[i], err = ReadImageFolder(loc.paths[j], opt.Image); err != nil {
						return
					}
				}
			}
		}
		train, test = sets[0].Raw, sets[1].Raw
	default:
		err = fmt.Errorf("data: internal: unknown format %q", l.Format)
	}
	if err != nil {
		return
	}
	for i, r := range []*RawSet{train, test} {
		if r.C != spec.C || r.H != spec.H || r.W != spec.W {
			err = formatErr(roleFile(loc, i == 0), "images are %dx%dx%d, want %dx%dx%d", r.C, r.H, r.W, spec.C, spec.H, spec.W)
			return
		}
	}
	if train.Classes != spec.Classes || test.Classes != spec.Classes {
		err = fmt.Errorf("data: %s: found %d train and %d test classes, want %d", spec.Name, train.Classes, test.Classes, spec.Classes)
		return
	}
	for _, x := range []struct {
		what        string
		got, wanted int
	}{{"train", train.N, l.TrainCount}, {"test", test.N, l.TestCount}} {
		if x.wanted != 0 && x.got != x.wanted {
			msg := fmt.Sprintf("%s: %s set has %d images, the %s layout has %d", spec.Name, x.what, x.got, l.Name, x.wanted)
			if !opt.AllowUnknown {
				err = errors.New("data: " + msg)
				return
			}
			ld.warnings = append(ld.warnings, msg)
		}
	}
	if opt.Transpose {
		if err = train.Transpose(); err != nil {
			return
		}
		if err = test.Transpose(); err != nil {
			return
		}
	}
	return train, test, ld.warnings, nil
}

func countRole(l *Layout, role Role) int {
	n := 0
	for _, f := range l.Files {
		if f.Role == role {
			n++
		}
	}
	return n
}

// roleFile names the file (or folder) holding a layout's train or test images, for errors.
func roleFile(loc *located, train bool) string {
	want := map[Role]bool{RoleTestImages: !train, RoleTest: !train, RoleTrainImages: train, RoleTrain: train, RoleArchive: true}
	for i, f := range loc.layout.Files {
		if want[f.Role] && loc.paths[i] != "" {
			return loc.paths[i]
		}
	}
	return loc.paths[0]
}
