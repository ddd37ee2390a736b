// Reading IDX files (MNIST, Fashion-MNIST, KMNIST, EMNIST), raw or gzip-compressed.

package data

import (
	"encoding/binary"
	"slices"
)

// IDX is a decoded IDX file of unsigned bytes (type code 0x08): Dims from the header
// (e.g. [60000 28 28] for images, [60000] for labels) and the data in row-major order.
type IDX struct {
	Dims []int
	Data []uint8
}

// ReadIDX reads an IDX file of unsigned bytes, raw or gzip-compressed (detected by the
// gzip magic). The file size must match the header exactly.
func ReadIDX(path string) (*IDX, error) {
	b, err := readBlob(path)
	if err != nil {
		return nil, err
	}
	return parseIDX(path, b.data)
}

// parseIDX decodes the (decompressed) content of an IDX file. The returned Data
// aliases content.
func parseIDX(name string, content []byte) (*IDX, error) {
	if len(content) < 4 {
		return nil, formatErr(name, "too short for an IDX header (%d bytes)", len(content))
	}
	if content[0] != 0 || content[1] != 0 {
		return nil, formatErr(name, "bad IDX magic %#08x (expected 0x0000080N)", binary.BigEndian.Uint32(content))
	}
	if content[2] != 0x08 {
		return nil, formatErr(name, "IDX element type %#02x is not unsigned byte (0x08)", content[2])
	}
	nd := int(content[3])
	if nd < 1 || nd > 4 {
		return nil, formatErr(name, "IDX with %d dimensions is not supported (1 to 4)", nd)
	}
	hdr := 4 + 4*nd
	if len(content) < hdr {
		return nil, formatErr(name, "truncated IDX header: %d bytes, need %d", len(content), hdr)
	}
	dims := make([]int, nd)
	total, tooBig := int64(1), false
	for i := range dims {
		d := int64(binary.BigEndian.Uint32(content[4+4*i:]))
		dims[i] = int(d)
		if d != 0 && total > int64(len(content))/d {
			tooBig = true // the product exceeds the file; stop before it overflows
		} else {
			total *= d
		}
	}
	have := int64(len(content) - hdr)
	if slices.Contains(dims, 0) {
		total, tooBig = 0, false
	}
	if tooBig {
		return nil, formatErr(name, "header dimensions %v need more bytes than the file holds (%d bytes of data)", dims, have)
	}
	if total != have {
		return nil, formatErr(name, "header dimensions %v need %d bytes of data, but the file holds %d", dims, total, have)
	}
	return &IDX{Dims: dims, Data: content[hdr:]}, nil
}

// parseIDXImages checks that an IDX file holds 3-d images [N, H, W].
func parseIDXImages(name string, content []byte) (*IDX, error) {
	x, err := parseIDX(name, content)
	if err != nil {
		return nil, err
	}
	if len(x.Dims) != 3 {
		return nil, formatErr(name, "images file has %d dimensions %v, want 3 (magic 0x00000803)", len(x.Dims), x.Dims)
	}
	return x, nil
}

// parseIDXLabels checks that an IDX file holds 1-d labels [N].
func parseIDXLabels(name string, content []byte) (*IDX, error) {
	x, err := parseIDX(name, content)
	if err != nil {
		return nil, err
	}
	if len(x.Dims) != 1 {
		return nil, formatErr(name, "labels file has %d dimensions %v, want 1 (magic 0x00000801)", len(x.Dims), x.Dims)
	}
	return x, nil
}

// IDXOptions say how to interpret an IDX image/label pair.
type IDXOptions struct {
	Classes     int // labels must lie in [LabelOffset, LabelOffset+Classes)
	LabelOffset int // subtracted from every label (EMNIST letters: 1, so 1..26 → 0..25)
	H, W        int // required image size; 0 = accept what the header says
}

// ReadIDXPair reads an IDX images file and its labels file into a RawSet (C = 1),
// checking that the counts agree, the image size is as required and every label is in
// range.
func ReadIDXPair(imagesPath, labelsPath string, opt IDXOptions) (*RawSet, error) {
	ib, err := readBlob(imagesPath)
	if err != nil {
		return nil, err
	}
	lb, err := readBlob(labelsPath)
	if err != nil {
		return nil, err
	}
	return decodeIDXPair(imagesPath, ib.data, labelsPath, lb.data, opt)
}

func decodeIDXPair(imgName string, imgContent []byte, lblName string, lblContent []byte, opt IDXOptions) (*RawSet, error) {
	im, err := parseIDXImages(imgName, imgContent)
	if err != nil {
		return nil, err
	}
	lb, err := parseIDXLabels(lblName, lblContent)
	if err != nil {
		return nil, err
	}
	n, h, w := im.Dims[0], im.Dims[1], im.Dims[2]
	if (opt.H != 0 && h != opt.H) || (opt.W != 0 && w != opt.W) {
		return nil, formatErr(imgName, "images are %dx%d, want %dx%d", h, w, opt.H, opt.W)
	}
	if lb.Dims[0] != n {
		return nil, formatErr(lblName, "%d labels for %d images in %s", lb.Dims[0], n, imgName)
	}
	if opt.Classes <= 0 {
		return nil, formatErr(lblName, "internal: number of classes not set")
	}
	labels := make([]int64, n)
	for i, l := range lb.Data {
		v := int64(l) - int64(opt.LabelOffset)
		if v < 0 || v >= int64(opt.Classes) {
			return nil, formatErr(lblName, "label %d of example %d is out of range [%d, %d)", l, i, opt.LabelOffset, opt.LabelOffset+opt.Classes)
		}
		labels[i] = v
	}
	return &RawSet{N: n, C: 1, H: h, W: w, Pixels: im.Data, Labels: labels, Classes: opt.Classes}, nil
}
