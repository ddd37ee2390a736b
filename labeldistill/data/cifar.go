// Reading CIFAR-10 and CIFAR-100 binary files (raw or gzip-compressed).

package data

import "fmt"

// CIFAR record layouts: CIFAR-10 is <label><3072 pixels>; CIFAR-100 is
// <coarse label><fine label><3072 pixels>. Pixels are 1024 R, 1024 G, 1024 B bytes,
// each a 32×32 row-major plane, so a record's pixels are already C×H×W.
const (
	cifarPixels     = 3 * 32 * 32
	cifar10Record   = 1 + cifarPixels
	cifar100Record  = 2 + cifarPixels
	cifar100Coarse  = 20
	cifar100Classes = 100
)

// ReadCIFAR reads CIFAR binary files (e.g. data_batch_1.bin … data_batch_5.bin, or
// train.bin) in the given order into one RawSet of 3×32×32 images. With fine100 the files
// are CIFAR-100 records and the fine label is used (the coarse byte must be < 20);
// otherwise they are CIFAR-10 records with labels < 10. gzip is detected by its magic.
func ReadCIFAR(paths []string, fine100 bool) (*RawSet, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("data: ReadCIFAR: no files given")
	}
	var parts []*RawSet
	for _, p := range paths {
		b, err := readBlob(p)
		if err != nil {
			return nil, err
		}
		r, err := decodeCIFAR(p, b.data, fine100)
		if err != nil {
			return nil, err
		}
		parts = append(parts, r)
	}
	return concatRaw(parts), nil
}

// decodeCIFAR decodes the (decompressed) content of one CIFAR binary file.
func decodeCIFAR(name string, content []byte, fine100 bool) (*RawSet, error) {
	rec, classes := cifar10Record, 10
	if fine100 {
		rec, classes = cifar100Record, cifar100Classes
	}
	if len(content) == 0 {
		return nil, formatErr(name, "empty file")
	}
	if len(content)%rec != 0 {
		return nil, formatErr(name, "size %d is not a multiple of the %d-byte record (%d whole records and %d bytes left over)",
			len(content), rec, len(content)/rec, len(content)%rec)
	}
	n := len(content) / rec
	r := &RawSet{N: n, C: 3, H: 32, W: 32, Pixels: make([]uint8, n*cifarPixels), Labels: make([]int64, n), Classes: classes}
	for i := 0; i < n; i++ {
		b := content[i*rec : (i+1)*rec]
		label := b[rec-cifarPixels-1]
		if fine100 && b[0] >= cifar100Coarse {
			return nil, formatErr(name, "record %d: coarse label %d is out of range [0, %d)", i, b[0], cifar100Coarse)
		}
		if int(label) >= classes {
			return nil, formatErr(name, "record %d: label %d is out of range [0, %d)", i, label, classes)
		}
		r.Labels[i] = int64(label)
		copy(r.Pixels[i*cifarPixels:], b[rec-cifarPixels:])
	}
	return r, nil
}

// concatRaw joins raw sets with identical image shape and classes (file order kept).
func concatRaw(parts []*RawSet) *RawSet {
	if len(parts) == 1 {
		return parts[0]
	}
	out := &RawSet{C: parts[0].C, H: parts[0].H, W: parts[0].W, Classes: parts[0].Classes}
	for _, p := range parts {
		out.N += p.N
	}
	out.Pixels = make([]uint8, 0, out.N*out.ImageSize())
	out.Labels = make([]int64, 0, out.N)
	for _, p := range parts {
		out.Pixels = append(out.Pixels, p.Pixels...)
		out.Labels = append(out.Labels, p.Labels...)
	}
	return out
}
