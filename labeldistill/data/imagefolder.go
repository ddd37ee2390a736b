// Reading class-per-folder image trees (JPEG/PNG), from disk or streamed from a tar or
// tar.gz archive, into RGB images resized to Size×Size.

package data

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // register the JPEG decoder
	_ "image/png"  // register the PNG decoder
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/image/draw"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// ImageOptions control how image folders and archives are read.
type ImageOptions struct {
	// Classes lists the class names in label order (e.g. from batches.meta.txt). nil:
	// the sorted names of the class sub-folders. With a list, every class must have a
	// non-empty folder and every folder must be in the list.
	Classes []string
	// Size is the output side length (default 32). Images of another size are resized to
	// exactly Size×Size (aspect ratio not kept) with Filter.
	Size int
	// Filter names the golang.org/x/image/draw resampling filter: "bilinear" (default;
	// draw.BiLinear, a triangle kernel that widens when shrinking, i.e. antialiased like
	// PIL's and torchvision's default bilinear Resize), "catmullrom" (draw.CatmullRom,
	// bicubic), "approxbilinear" or "nearest".
	Filter string
	// Workers is the number of decoding goroutines (0: GOMAXPROCS). The result does not
	// depend on it.
	Workers int
	// Context, when set, ends the reading early once it is done: its error is returned.
	Context context.Context
}

// ImageSet is the result of reading an image tree: RGB images (C = 3) in class order,
// then file-name order within a class; Files[i] is the path of image i relative to the
// tree's root (as "class/file").
type ImageSet struct {
	Raw        *RawSet
	ClassNames []string
	Files      []string
}

// Image extensions that are decoded; other files are ignored.
var imageExts = []string{".jpg", ".jpeg", ".png"}

func isImageName(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(path.Ext(name))) && !strings.HasPrefix(path.Base(name), ".")
}

// Limits against hostile inputs.
const (
	maxImageBytes  = 64 << 20 // per encoded image file
	maxImagePixels = 1 << 26  // per decoded image (e.g. 8192×8192)
	// maxHeldImageBytes bounds the encoded images one archive may hold in memory for
	// decoding (CIFAR-10's 60,000 JPEGs are about 150 MiB).
	maxHeldImageBytes = 2 << 30
	// maxClassListBytes bounds a class-name list (CIFAR-100's fine names: 700 bytes).
	maxClassListBytes = 1 << 20
)

var filters = map[string]draw.Interpolator{
	"bilinear":       draw.BiLinear,
	"catmullrom":     draw.CatmullRom,
	"approxbilinear": draw.ApproxBiLinear,
	"nearest":        draw.NearestNeighbor,
}

func (o ImageOptions) resolved() (ImageOptions, draw.Interpolator, error) {
	if o.Size == 0 {
		o.Size = 32
	}
	if o.Size < 0 || o.Size > 4096 {
		return o, nil, fmt.Errorf("data: image size %d out of range", o.Size)
	}
	if o.Filter == "" {
		o.Filter = "bilinear"
	}
	f, ok := filters[o.Filter]
	if !ok {
		return o, nil, fmt.Errorf("data: unknown resize filter %q (bilinear, catmullrom, approxbilinear, nearest)", o.Filter)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o, f, nil
}

// encoded is one image file found in a tree.
type encoded struct {
	class, file string // class folder name and file name
	data        []byte // nil for on-disk files until read
	path        string // on-disk path ("" for archive members)
}

// ReadImageFolder reads dir/<class>/<image> into an ImageSet. Symbolic links to class
// folders and to images are followed; a link to nothing, a link loop, or an image name that
// is not a regular file is an error naming it.
func ReadImageFolder(dir string, opt ImageOptions) (*ImageSet, error) {
	opt, filter, err := opt.resolved()
	if err != nil {
		return nil, err
	}
	classes, err := classFolders(dir)
	if err != nil {
		return nil, err
	}
	var items []encoded
	for _, class := range classes {
		files, err := classImages(filepath.Join(dir, class))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			items = append(items, encoded{class: class, file: f, path: filepath.Join(dir, class, f)})
		}
	}
	return decodeTree(dir, classes, items, opt, filter)
}

// classFolders lists the class folders of dir (sub-folders, or symbolic links to folders,
// not starting with "."), in name order.
func classFolders(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, followError(dir, err)
	}
	var classes []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		t, err := entryType(dir, e)
		if err != nil {
			return nil, err
		}
		if t.IsDir() {
			classes = append(classes, e.Name())
		}
	}
	return classes, nil
}

// classImages lists the image files of a class folder (names with an image extension, not
// starting with "."), in name order. Links are followed; an image name that is (or links
// to) something other than a regular file or a folder is an error, never skipped.
func classImages(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, followError(dir, err)
	}
	var files []string
	for _, e := range entries {
		if !isImageName(e.Name()) {
			continue
		}
		t, err := entryType(dir, e)
		if err != nil {
			return nil, err
		}
		switch {
		case t.IsRegular():
			files = append(files, e.Name())
		case !t.IsDir(): // a folder named like an image is not read, as other folders
			return nil, formatErr(filepath.Join(dir, e.Name()), "is not a regular file (%s)", boundedread.TypeName(t))
		}
	}
	return files, nil
}

// entryType is the type of a folder entry, or of what it links to.
func entryType(dir string, e os.DirEntry) (fs.FileMode, error) {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.Type(), nil
	}
	p := filepath.Join(dir, e.Name())
	st, err := os.Stat(p)
	if err != nil {
		return 0, followError(p, err)
	}
	return st.Mode().Type(), nil
}

// followError words a failure to open or follow p: a symbolic link loop, or a link to
// nothing, is said to be one.
func followError(p string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return formatErr(p, "is a symbolic link loop (following it leads back to a link already followed)")
	case errors.Is(err, fs.ErrNotExist):
		if target, lerr := os.Readlink(p); lerr == nil {
			return formatErr(p, "is a symbolic link to nothing (%s does not exist)", target)
		}
	}
	return err
}

// ReadImageTar streams a tar or tar.gz archive (gzip detected by magic) holding
// <prefix>/<class>/<image> trees, one ImageSet per prefix (e.g. "cifar-10-images/train"
// and "cifar-10-images/test"), without unpacking it to disk.
func ReadImageTar(archive string, prefixes []string, opt ImageOptions) ([]*ImageSet, error) {
	b, err := readFileHashed(archive)
	if err != nil {
		return nil, err
	}
	return decodeImageTar(b, prefixes, opt)
}

func decodeImageTar(b *blob, prefixes []string, opt ImageOptions) ([]*ImageSet, error) {
	opt, filter, err := opt.resolved()
	if err != nil {
		return nil, err
	}
	r, err := b.stream()
	if err != nil {
		return nil, err
	}
	items := make([][]encoded, len(prefixes))
	found := make([]map[string]bool, len(prefixes))
	for i := range found {
		found[i] = map[string]bool{}
	}
	tr := tar.NewReader(r)
	var held int64 // encoded image bytes kept for decoding
	for {
		if err := opt.stopped(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return nil, fe
			}
			return nil, &FormatError{File: b.path, Problem: "corrupt tar archive", Err: err}
		}
		name := strings.TrimPrefix(h.Name, "./")
		for i, p := range prefixes {
			rest, ok := strings.CutPrefix(name, strings.TrimSuffix(p, "/")+"/")
			if !ok {
				continue
			}
			class, file, ok := strings.Cut(rest, "/")
			if !ok || class == "" || strings.HasPrefix(class, ".") {
				continue
			}
			if h.Typeflag == tar.TypeDir && file == "" {
				found[i][class] = true
				continue
			}
			if strings.Contains(file, "/") || !isImageName(file) {
				continue
			}
			if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
				return nil, formatErr(b.path+":"+name, "is a link to %s; links inside image archives are not followed (archive the image itself)", h.Linkname)
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA {
				continue
			}
			found[i][class] = true
			if h.Size > maxImageBytes {
				return nil, formatErr(b.path+":"+name, "image file of %s is larger than the %s limit for image files", boundedread.Size(h.Size), boundedread.Size(maxImageBytes))
			}
			if held += h.Size; held > maxHeldImageBytes {
				return nil, formatErr(b.path, "its images add up to more than the %s limit for one archive", boundedread.Size(maxHeldImageBytes))
			}
			data := make([]byte, h.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				var fe *FormatError
				if errors.As(err, &fe) {
					return nil, fe
				}
				return nil, &FormatError{File: b.path + ":" + name, Problem: "truncated tar member", Err: err}
			}
			items[i] = append(items[i], encoded{class: class, file: file, data: data})
		}
	}
	out := make([]*ImageSet, len(prefixes))
	for i, p := range prefixes {
		classes := make([]string, 0, len(found[i]))
		for c := range found[i] {
			classes = append(classes, c)
		}
		if len(classes) == 0 {
			return nil, formatErr(b.path, "no class folders under %s/", p)
		}
		set, err := decodeTree(b.path+":"+p, classes, items[i], opt, filter)
		if err != nil {
			return nil, err
		}
		out[i] = set
	}
	return out, nil
}

// decodeTree orders the items (class order, then file name), checks the classes against
// opt.Classes, and decodes all images in parallel.
func decodeTree(root string, folders []string, items []encoded, opt ImageOptions, filter draw.Interpolator) (*ImageSet, error) {
	classes := opt.Classes
	if classes == nil {
		classes = slices.Clone(folders)
		sort.Strings(classes)
	}
	index := make(map[string]int, len(classes))
	for i, c := range classes {
		if _, dup := index[c]; dup {
			return nil, formatErr(root, "class %q is listed twice", c)
		}
		index[c] = i
	}
	for _, f := range folders {
		if _, ok := index[f]; !ok {
			return nil, formatErr(root, "folder %q is not in the class list %v", f, classes)
		}
	}
	count := make([]int, len(classes))
	for _, it := range items {
		count[index[it.class]]++
	}
	for i, c := range count {
		if c == 0 {
			return nil, formatErr(root, "class folder %q is empty or missing (no .jpg/.jpeg/.png files)", classes[i])
		}
	}
	sort.Slice(items, func(a, b int) bool {
		ca, cb := index[items[a].class], index[items[b].class]
		if ca != cb {
			return ca < cb
		}
		return items[a].file < items[b].file
	})
	n, s := len(items), opt.Size
	set := &ImageSet{
		Raw:        &RawSet{N: n, C: 3, H: s, W: s, Pixels: make([]uint8, n*3*s*s), Labels: make([]int64, n), Classes: len(classes)},
		ClassNames: classes,
		Files:      make([]string, n),
	}
	for i, it := range items {
		set.Raw.Labels[i] = int64(index[it.class])
		set.Files[i] = it.class + "/" + it.file
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int, 256)
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				it := &items[i]
				name := root + "/" + set.Files[i]
				data := it.data
				if data == nil {
					var err error
					if data, err = readImageFile(it.path); err != nil {
						errs[i] = err
						continue
					}
				}
				errs[i] = decodeImage(name, data, s, filter, set.Raw.Pixels[i*3*s*s:(i+1)*3*s*s])
				it.data = nil // let the encoded bytes go
			}
		}()
	}
	for i := range items {
		if opt.stopped() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := opt.stopped(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err // the first failing image in order, whatever the scheduling
		}
	}
	return set, nil
}

// readImageFile reads an image file whole, through maxImageBytes.
func readImageFile(p string) ([]byte, error) {
	b, err := boundedread.ReadFile(p, maxImageBytes, "image file")
	var tl *boundedread.TooLargeError
	if errors.As(err, &tl) {
		return nil, formatErr(p, "%s", tl.Problem())
	}
	return b, err
}

// decodeImage decodes one JPEG/PNG, resizes it to size×size when needed and writes it
// as planar RGB (C×H×W) into out.
func decodeImage(name string, data []byte, size int, filter draw.Interpolator, out []uint8) error {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return &FormatError{File: name, Problem: "cannot decode image", Err: err}
	}
	// Decoders allocate the whole image from the header, so a few forged bytes could
	// claim gigapixels: allow 4096 pixels per input byte (real photos and even flat
	// images stay far below), at least 4 Mpixel, at most maxImagePixels.
	limit := min(maxImagePixels, max(4<<20, 4096*int64(len(data))))
	if px := int64(cfg.Width) * int64(cfg.Height); cfg.Width <= 0 || cfg.Height <= 0 || px > limit {
		return formatErr(name, "image size %dx%d is empty or too large for a %d-byte file", cfg.Width, cfg.Height, len(data))
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return &FormatError{File: name, Problem: "cannot decode image", Err: err}
	}
	if b := img.Bounds(); b.Dx() != size || b.Dy() != size {
		// Alpha is dropped before resizing, as without resizing (toPlanarRGB): the
		// filters work on premultiplied colour, which would blend transparent pixels'
		// colours towards black.
		img = withoutAlpha(img)
		dst := image.NewNRGBA(image.Rect(0, 0, size, size))
		filter.Scale(dst, dst.Bounds(), img, b, draw.Src, nil)
		img = dst
	}
	toPlanarRGB(img, out)
	return nil
}

// withoutAlpha returns img with every pixel's colour taken un-premultiplied and its alpha
// set to opaque (img itself when it has no transparency). 16-bit colour stays 16-bit.
func withoutAlpha(img image.Image) image.Image {
	switch m := img.(type) {
	case *image.Gray, *image.Gray16, *image.YCbCr, *image.CMYK:
		return img
	case interface{ Opaque() bool }:
		if m.Opaque() {
			return img
		}
	}
	b := img.Bounds()
	out := image.NewNRGBA64(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var c color.NRGBA64
			switch p := img.At(x, y).(type) {
			case color.NRGBA: // (the model's Convert would premultiply and lose it)
				c = color.NRGBA64{uint16(p.R) * 0x101, uint16(p.G) * 0x101, uint16(p.B) * 0x101, 0}
			default: // NRGBA64 as it is; premultiplied colour as well as it can be undone
				c = color.NRGBA64Model.Convert(p).(color.NRGBA64)
			}
			c.A = 0xffff
			out.SetNRGBA64(x, y, c)
		}
	}
	return out
}

// toPlanarRGB writes img (whose bounds are size×size) as R, G and B planes. Alpha is
// dropped without compositing (colours are taken un-premultiplied, like PIL's
// convert("RGB")); 16-bit channels keep their high byte. JPEG YCbCr is converted with
// libjpeg's rounding (yccToRGB).
func toPlanarRGB(img image.Image, out []uint8) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	plane := w * h
	r, g, bl := out[:plane], out[plane:2*plane], out[2*plane:3*plane]
	switch m := img.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				k := y*w + x
				r[k], g[k], bl[k] = yccToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := 0; x < w; x++ {
				k := y*w + x
				r[k], g[k], bl[k] = row[x], row[x], row[x]
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := 0; x < w; x++ {
				k := y*w + x
				r[k], g[k], bl[k] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				k := y*w + x
				r[k], g[k], bl[k] = c.R, c.G, c.B
			}
		}
	}
}

// ReadClassNames reads a class-name list such as CIFAR-10's batches.meta.txt: one name
// per line, surrounding blanks trimmed, empty lines ignored.
func ReadClassNames(p string) ([]string, error) {
	b, err := boundedread.ReadFile(p, maxClassListBytes, "class-name list")
	var tl *boundedread.TooLargeError
	if errors.As(err, &tl) {
		return nil, formatErr(p, "%s", tl.Problem())
	}
	if err != nil {
		return nil, err
	}
	return parseClassNames(p, b)
}

func parseClassNames(name string, b []byte) ([]string, error) {
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			if slices.Contains(names, s) {
				return nil, formatErr(name, "class %q is listed twice", s)
			}
			names = append(names, s)
		}
	}
	if len(names) == 0 {
		return nil, formatErr(name, "no class names")
	}
	return names, nil
}

// libjpeg's YCbCr → RGB tables (jdcolor.c, build_ycc_rgb_table): 16-bit fixed point
// with rounding. Go's color.YCbCrToRGB truncates instead, which lowers CIFAR-10's
// channel means by about 1e-4 compared with libjpeg/PIL decodes of the same JPEGs;
// with these tables they agree to about 1e-5. (Chroma upsampling stays Go's
// nearest-neighbour; libjpeg's "fancy" triangle upsampling is not reproduced.)
var yccTab = func() (t struct{ crR, cbB, crG, cbG [256]int32 }) {
	const bits = 16
	fix := func(x float64) int32 { return int32(x*(1<<bits) + 0.5) }
	const half = 1 << (bits - 1)
	for i := range 256 {
		x := int32(i - 128)
		t.crR[i] = (fix(1.40200)*x + half) >> bits
		t.cbB[i] = (fix(1.77200)*x + half) >> bits
		t.crG[i] = -fix(0.71414) * x
		t.cbG[i] = -fix(0.34414)*x + half
	}
	return
}()

// yccToRGB converts one JPEG YCbCr pixel to RGB as libjpeg does.
func yccToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy := int32(y)
	return clamp255(yy + yccTab.crR[cr]), clamp255(yy + (yccTab.cbG[cb]+yccTab.crG[cr])>>16), clamp255(yy + yccTab.cbB[cb])
}

func clamp255(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}
