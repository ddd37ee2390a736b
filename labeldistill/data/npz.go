// Reading Kuzushiji-49's NumPy .npz files (member arr_0) through torch/fileio/npz.

package data

import (
	"bytes"
	"errors"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// ReadK49 reads Kuzushiji-49's k49-*-imgs.npz (arr_0: uint8 [N, 28, 28], pixels as
// stored, 0 = background) and k49-*-labels.npz (arr_0: N integer labels in [0, classes)).
// Unlike the reference implementation, pixels are not altered (it turned p into
// (256 − p) mod 256).
func ReadK49(imagesPath, labelsPath string, classes int) (*RawSet, error) {
	ib, err := readBlob(imagesPath)
	if err != nil {
		return nil, err
	}
	lb, err := readBlob(labelsPath)
	if err != nil {
		return nil, err
	}
	return decodeK49(imagesPath, ib.data, labelsPath, lb.data, classes)
}

// npzMember reads the single array arr_0 of an .npz file held in memory.
func npzMember(name string, content []byte) (*npz.Array, error) {
	a, err := npz.Read(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		var e *npz.Error
		if errors.As(err, &e) {
			e.File = ""
			return nil, &FormatError{File: name, Problem: "bad .npz file", Err: e}
		}
		return nil, &FormatError{File: name, Problem: "bad .npz file", Err: err}
	}
	x := a.Get("arr_0")
	if x == nil {
		return nil, formatErr(name, "no member arr_0.npy (members: %v)", a.Names())
	}
	return x, nil
}

func decodeK49(imgName string, imgContent []byte, lblName string, lblContent []byte, classes int) (*RawSet, error) {
	im, err := npzMember(imgName, imgContent)
	if err != nil {
		return nil, err
	}
	if im.DType != "uint8" || len(im.Shape) != 3 {
		return nil, formatErr(imgName, "arr_0 is %s %v, want uint8 [N, H, W]", im.DType, im.Shape)
	}
	pixels, _ := im.Uint8s()
	lb, err := npzMember(lblName, lblContent)
	if err != nil {
		return nil, err
	}
	if len(lb.Shape) != 1 {
		return nil, formatErr(lblName, "arr_0 has shape %v, want [N]", lb.Shape)
	}
	n := im.Shape[0]
	if lb.Shape[0] != n {
		return nil, formatErr(lblName, "%d labels for %d images in %s", lb.Shape[0], n, imgName)
	}
	labels := make([]int64, n)
	switch v := lb.Data.(type) {
	case []uint8:
		for i, x := range v {
			labels[i] = int64(x)
		}
	case []int32:
		for i, x := range v {
			labels[i] = int64(x)
		}
	case []int64:
		copy(labels, v)
	default:
		return nil, formatErr(lblName, "labels have dtype %s, want an integer type", lb.DType)
	}
	r := &RawSet{N: n, C: 1, H: im.Shape[1], W: im.Shape[2], Pixels: pixels, Labels: labels, Classes: classes}
	if err := r.check(lblName); err != nil {
		return nil, err
	}
	return r, nil
}
