// RawSet, the undecorated uint8 images and labels every reader produces, and whole-file
// reading with gzip detection and checksums.

package data

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// RawSet is a set of uint8 images as stored (N×C×H×W, C planes of H×W each, row-major)
// with their class labels, in source-file order.
type RawSet struct {
	N, C, H, W int
	Pixels     []uint8 // len N*C*H*W
	Labels     []int64 // len N, each in [0, Classes)
	Classes    int
}

// ImageSize returns C*H*W, the number of pixels of one image.
func (r *RawSet) ImageSize() int { return r.C * r.H * r.W }

// Transpose swaps rows and columns of every image plane in place (EMNIST's stored
// orientation is transposed relative to MNIST). It needs H == W.
func (r *RawSet) Transpose() error {
	if r.H != r.W {
		return fmt.Errorf("data: cannot transpose %dx%d images (not square)", r.H, r.W)
	}
	n := r.H
	for p := 0; p < r.N*r.C; p++ {
		img := r.Pixels[p*n*n : (p+1)*n*n]
		for y := 0; y < n; y++ {
			for x := y + 1; x < n; x++ {
				img[y*n+x], img[x*n+y] = img[x*n+y], img[y*n+x]
			}
		}
	}
	return nil
}

// check validates sizes and label ranges.
func (r *RawSet) check(file string) error {
	if r.N < 0 || len(r.Pixels) != r.N*r.ImageSize() || len(r.Labels) != r.N {
		return formatErr(file, "internal: %d pixels and %d labels for %d images of %dx%dx%d",
			len(r.Pixels), len(r.Labels), r.N, r.C, r.H, r.W)
	}
	for i, l := range r.Labels {
		if l < 0 || l >= int64(r.Classes) {
			return formatErr(file, "label %d of example %d is out of range [0, %d)", l, i, r.Classes)
		}
	}
	return nil
}

// blob is a whole data file in memory, hashed, decompressed on demand.
type blob struct {
	path    string
	file    []byte // the bytes on disk
	gzipped bool
	sha     string // sha256 of file
	data    []byte // decompressed content once content() ran (== file when not gzip)
}

// Size bounds for data files read whole (IDX, CIFAR binary, .npz, image archives): the
// largest registered file, CIFAR-100's train.bin, has 150 MiB, and the largest content,
// Kuzushiji-49's training images, 178 MiB.
const (
	maxDataFileBytes = 1 << 30 // on disk
	maxContentBytes  = 2 << 30 // decompressed
)

// readFileHashed reads path whole (at most maxDataFileBytes) and hashes it; decompression
// waits for content().
func readFileHashed(path string) (*blob, error) {
	// A data file is a regular file: a named pipe would hold the run until something
	// writes to it, a device (/dev/zero) would be read to the bound.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, formatErr(path, "is not a regular file (%s)", boundedread.TypeName(st.Mode()))
	}
	file, err := boundedread.ReadFile(path, maxDataFileBytes, "data file")
	var tl *boundedread.TooLargeError
	if errors.As(err, &tl) {
		return nil, formatErr(path, "%s", tl.Problem())
	}
	if err != nil {
		return nil, err
	}
	s := sha256.Sum256(file)
	b := &blob{path: path, file: file, gzipped: isGzip(file), sha: hex.EncodeToString(s[:])}
	if !b.gzipped {
		b.data = file
	}
	return b, nil
}

// readBlob reads, hashes and (when it starts with the gzip magic) decompresses path.
func readBlob(path string) (*blob, error) {
	b, err := readFileHashed(path)
	if err != nil {
		return nil, err
	}
	if _, err := b.content(); err != nil {
		return nil, err
	}
	return b, nil
}

// content returns the decompressed bytes, decompressing on the first call.
func (b *blob) content() ([]byte, error) {
	if b.data == nil {
		d, err := gunzip(b.path, b.file)
		if err != nil {
			return nil, err
		}
		b.data = d
	}
	return b.data, nil
}

// stream returns a reader of the decompressed content without holding all of it.
func (b *blob) stream() (io.Reader, error) {
	if !b.gzipped {
		return bytes.NewReader(b.file), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b.file))
	if err != nil {
		return nil, &FormatError{File: b.path, Problem: "corrupt gzip header", Err: err}
	}
	return &gzipErrReader{name: b.path, r: zr, limit: maxContentBytes}, nil
}

// gzipErrReader turns gzip errors into FormatErrors naming the file. With a limit, a
// stream that expands beyond it fails.
type gzipErrReader struct {
	name        string
	r           io.Reader
	limit, read int64 // limit 0: none
}

func (g *gzipErrReader) Read(p []byte) (int, error) {
	if g.limit > 0 && int64(len(p)) > g.limit+1-g.read {
		p = p[:g.limit+1-g.read] // one byte past the limit shows it is exceeded
	}
	n, err := g.r.Read(p)
	if g.read += int64(n); g.limit > 0 && g.read > g.limit {
		return 0, formatErr(g.name, "gzip stream expands beyond the %s limit for data files", boundedread.Size(g.limit))
	}
	if err != nil && err != io.EOF {
		problem := "corrupt gzip stream"
		if errors.Is(err, io.ErrUnexpectedEOF) {
			problem = "truncated gzip stream"
		}
		err = &FormatError{File: g.name, Problem: problem, Err: err}
	}
	return n, err
}

// contentSHA returns the sha256 of the decompressed content ("" when not gzipped).
func (b *blob) contentSHA() (string, error) {
	if !b.gzipped {
		return "", nil
	}
	h := sha256.New()
	if b.data != nil {
		h.Write(b.data)
	} else {
		r, err := b.stream()
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(h, r); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxInflate bounds decompressed size relative to compressed size (deflate's limit is
// about 1032:1) so that a forged gzip stream cannot exhaust memory.
const maxInflate = 1032

// isGzip reports whether b starts with the gzip magic.
func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// gunzip decompresses a whole (possibly multi-member) gzip stream.
func gunzip(name string, file []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(file))
	if err != nil {
		return nil, &FormatError{File: name, Problem: "corrupt gzip header", Err: err}
	}
	defer zr.Close()
	// The trailer's ISIZE is the last member's size mod 2^32: a good hint for one
	// allocation, capped by what the compressed bytes can possibly expand to.
	limit := min(int64(len(file))*maxInflate+1<<16, maxContentBytes)
	var hint int64
	if len(file) >= 4 {
		hint = int64(binary.LittleEndian.Uint32(file[len(file)-4:]))
	}
	hint = min(hint, limit)
	buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead)) // MinRead spare: no regrowth at EOF
	n, err := io.Copy(buf, &gzipErrReader{name: name, r: io.LimitReader(zr, limit+1)})
	if err != nil {
		return nil, err
	}
	if n > limit {
		if limit == maxContentBytes {
			return nil, formatErr(name, "gzip stream expands beyond the %s limit for data files", boundedread.Size(limit))
		}
		return nil, formatErr(name, "gzip stream expands beyond %s, more than its compressed size allows (a forged stream)", boundedread.Size(limit))
	}
	return buf.Bytes(), nil
}
