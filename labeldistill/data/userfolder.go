// A user's own dataset as an image folder: "imagefolder:PATH" with PATH/train/<class>/*
// and PATH/test/<class>/* (PNG or JPEG, the torchvision ImageFolder layout).

package data

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ImageFolderPrefix names a user's image folder as a dataset: "imagefolder:PATH".
const ImageFolderPrefix = "imagefolder:"

// ImageFolderPath returns PATH of "imagefolder:PATH" and whether name has that form.
func ImageFolderPath(name string) (string, bool) {
	p, ok := strings.CutPrefix(name, ImageFolderPrefix)
	return p, ok && p != ""
}

// FolderInfo are the facts of an image folder that can be had without decoding it.
type FolderInfo struct {
	Path       string
	ClassNames []string // sorted names of PATH/train's class folders (labels in this order)
	// Colour is false when the first training image is greyscale (a PNG or JPEG with one
	// channel): the folder is then read as 1×28×28, otherwise as 3×32×32 RGB.
	Colour                bool
	TrainCount, TestCount int
}

// C, H and W of the images as loaded.
func (f *FolderInfo) Shape() (c, h, w int) {
	if f.Colour {
		return 3, 32, 32
	}
	return 1, 28, 28
}

// ValidationSize is the default validation part of the train images: one sixth (MNIST's
// 10000 of 60000), at least one.
func (f *FolderInfo) ValidationSize() int { return max(1, f.TrainCount/6) }

var folderInfoCache sync.Map // path → *FolderInfo

// AbsImageFolderName returns "imagefolder:PATH" with PATH made absolute (against the
// working folder), so that a name stored in a run's settings keeps meaning the same
// folder from elsewhere; other names are returned unchanged.
func AbsImageFolderName(name string) (string, error) {
	p, ok := ImageFolderPath(name)
	if !ok {
		return name, nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("data: image folder %s: %w", p, err)
	}
	return ImageFolderPrefix + abs, nil
}

// InspectImageFolder lists an image folder's classes and counts its images (results are
// cached per path for the life of the process). FolderInfo.Path is the folder's absolute
// path. Symbolic links to the train and test folders, to class folders and to images are
// followed; a link to nothing or a link loop is an error naming it.
func InspectImageFolder(path string) (*FolderInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("data: image folder %s: %w", path, err)
	}
	path = abs
	if v, ok := folderInfoCache.Load(path); ok {
		return v.(*FolderInfo), nil
	}
	info := &FolderInfo{Path: path}
	var first string
	for _, part := range []string{"train", "test"} {
		dir := filepath.Join(path, part)
		classes, err := classFolders(dir)
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) { // a link loop or a link to nothing, named
				return nil, err
			}
			return nil, fmt.Errorf("data: image folder %s: needs %s/<class>/<image> (PNG or JPEG) folders for train and test: %w", path, part, err)
		}
		count := 0
		for _, class := range classes {
			files, err := classImages(filepath.Join(dir, class))
			if err != nil {
				return nil, err
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("data: image folder %s: class folder %s holds no .png/.jpg/.jpeg image", path, filepath.Join(part, class))
			}
			if first == "" {
				first = filepath.Join(dir, class, files[0])
			}
			count += len(files)
		}
		slices.Sort(classes)
		switch {
		case len(classes) < 2:
			return nil, fmt.Errorf("data: image folder %s: %s needs at least 2 class folders, found %d", path, part, len(classes))
		case part == "train":
			info.ClassNames, info.TrainCount = classes, count
		case !slices.Equal(classes, info.ClassNames):
			return nil, fmt.Errorf("data: image folder %s: test classes %v differ from train classes %v", path, classes, info.ClassNames)
		default:
			info.TestCount = count
		}
	}
	b, err := readImageFile(first)
	if err != nil {
		return nil, err
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, &FormatError{File: first, Problem: "cannot decode image", Err: err}
	}
	info.Colour = cfg.ColorModel != color.GrayModel && cfg.ColorModel != color.Gray16Model
	folderInfoCache.Store(path, info)
	return info, nil
}

// LoadImageFolder reads an image folder as a dataset: images resized to the FolderInfo
// shape (bilinear, antialiased, aspect ratio not kept; see ImageOptions), greyscale folders
// converted with the ITU-R 601 luma weights (exact for grey images). mean and std are the
// per-channel normalisation; nil computes them over the train images (p/255, population
// std). The Spec is built for this folder: validation is one sixth of the train images.
func LoadImageFolder(path string, mean, std []float64) (*RawData, error) {
	return LoadImageFolderContext(context.Background(), path, mean, std)
}

// LoadImageFolderContext is LoadImageFolder that stops early, with ctx's error, once ctx
// is done.
func LoadImageFolderContext(ctx context.Context, path string, mean, std []float64) (*RawData, error) {
	info, err := InspectImageFolder(path)
	if err != nil {
		return nil, err
	}
	path = info.Path // absolute
	c, h, w := info.Shape()
	opt := ImageOptions{Size: h, Classes: info.ClassNames, Context: ctx}
	var sets [2]*RawSet
	for i, part := range []string{"train", "test"} {
		s, err := ReadImageFolder(filepath.Join(path, part), opt)
		if err != nil {
			return nil, err
		}
		sets[i] = s.Raw
		if c == 1 {
			sets[i] = toGrey(s.Raw)
		}
	}
	if mean == nil || std == nil {
		mean, std = pixelStats(sets[0])
	}
	name := ImageFolderPrefix + path
	val := info.ValidationSize()
	spec := &Spec{Name: name, Classes: len(info.ClassNames), C: c, H: h, W: w, Mean: mean, Std: std,
		TrainTotal: sets[0].N, TargetSize: sets[0].N - val, ValidationSize: val, TestTotal: sets[1].N,
		ClassNames: info.ClassNames}
	return &RawData{Spec: spec, Train: sets[0], Test: sets[1], Layout: "imagefolder", Dir: path,
		Files: []string{filepath.Join(path, "train"), filepath.Join(path, "test")}}, nil
}

// toGrey converts 3-channel images to one channel: round(0.299 R + 0.587 G + 0.114 B).
func toGrey(r *RawSet) *RawSet {
	hw := r.H * r.W
	g := &RawSet{N: r.N, C: 1, H: r.H, W: r.W, Pixels: make([]uint8, r.N*hw), Labels: r.Labels, Classes: r.Classes}
	for i := 0; i < r.N; i++ {
		src := r.Pixels[i*3*hw : (i+1)*3*hw]
		for k := 0; k < hw; k++ {
			v := 0.299*float64(src[k]) + 0.587*float64(src[hw+k]) + 0.114*float64(src[2*hw+k])
			g.Pixels[i*hw+k] = uint8(math.Min(255, math.Round(v)))
		}
	}
	return g
}

// pixelStats returns the per-channel mean and population std of p/255 over all images.
func pixelStats(r *RawSet) (mean, std []float64) {
	hw := r.H * r.W
	mean, std = make([]float64, r.C), make([]float64, r.C)
	for c := 0; c < r.C; c++ {
		var sum, sq float64
		for i := 0; i < r.N; i++ {
			for _, p := range r.Pixels[(i*r.C+c)*hw : (i*r.C+c+1)*hw] {
				v := float64(p) / 255
				sum += v
				sq += v * v
			}
		}
		n := float64(r.N * hw)
		mean[c] = sum / n
		std[c] = math.Sqrt(max(sq/n-mean[c]*mean[c], 0))
		if std[c] == 0 {
			std[c] = 1 // a constant channel: centre it only
		}
	}
	return mean, std
}

// TreeSHA256 is the checksum of a folder tree: SHA-256 over the sorted lines
// "<relative path>\t<sha256 of the file>\n" of its regular files. Symbolic links are
// followed (the checksum covers what the image readers read), and named by the link's
// path; a link to nothing, or a link back to a folder it is in, is an error naming it.
// Other files (pipes, devices) are left out, as the image readers refuse them.
func TreeSHA256(root string, fileSum func(string) (string, error)) (string, error) {
	var lines []string
	var walk func(dir, rel string, above []fs.FileInfo) error
	walk = func(dir, rel string, above []fs.FileInfo) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return followError(dir, err)
		}
		for _, e := range entries {
			p, r := filepath.Join(dir, e.Name()), path.Join(rel, e.Name())
			st, err := os.Stat(p) // follows links
			if err != nil {
				return followError(p, err)
			}
			switch {
			case st.IsDir():
				for _, a := range above {
					if os.SameFile(a, st) {
						return formatErr(p, "is a symbolic link loop (it leads back to a folder it is in)")
					}
				}
				if err := walk(p, r, append(above, st)); err != nil {
					return err
				}
			case st.Mode().IsRegular():
				sum, err := fileSum(p)
				if err != nil {
					return err
				}
				lines = append(lines, r+"\t"+sum+"\n")
			}
		}
		return nil
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", followError(root, err)
	}
	if err := walk(root, "", []fs.FileInfo{st}); err != nil {
		return "", err
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
