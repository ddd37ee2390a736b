package torch

// pickle.go: named tensors in libtorch's pickle format, the file Python's torch.load reads.
//
// SavePickle writes what torch::pickle_save writes for a dict of tensors, the zip archive of
// torch.save (archive/data.pkl, archive/data/0, …, archive/version), except that the dict is
// not wrapped in TorchScript's type tag (torch.jit._pickle.restore_type_tag, which
// torch.load(weights_only=True), the default from PyTorch 2.6, refuses). In Python:
//
//	d = torch.load(path)   # a dict {name: tensor} in the order written; no NumPy needed
//
// Every tensor is saved detached (requires_grad False), on the CPU, holding only its own
// elements (a view of a larger tensor is copied out; the format would otherwise store the
// whole storage). Any dtype is kept as is (float16, bfloat16 and bool included). The file is
// written atomically through torch/fileio/atomicfile. LoadPickle reads such files back, and
// torch.save's or torch::pickle_save's files of a dict of tensors. The format has no seal of
// ours (it is PyTorch's): LoadPickle relies on the zip's CRC-32s, which it checks itself
// (libtorch's reader does not), and on checks that every storage fits its record and every
// tensor its storage.

/*
#include "shim.h"
*/
import "C"

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unsafe"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// SavePickle writes tensors[i] under names[i], in that order, to path in libtorch's pickle
// format (torch.load(path) gives a dict of tensors). Names must be non-empty, unique and free
// of NUL bytes; every tensor must be live. The values are copied to the CPU and detached.
func SavePickle(path string, names []string, tensors []*Tensor) error {
	const op = "save_pickle"
	data, err := encodePickle(op, path+": ", names, tensors)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return &Error{Op: op, Msg: path + ": " + err.Error(), err: err}
	}
	return nil
}

// EncodePickle returns the bytes SavePickle would write (for a caller that writes them
// itself, or needs their checksum).
func EncodePickle(names []string, tensors []*Tensor) ([]byte, error) {
	return encodePickle("encode_pickle", "", names, tensors)
}

// encodePickle is EncodePickle with op and a prefix for its error messages (the file's name).
func encodePickle(op, where string, names []string, tensors []*Tensor) ([]byte, error) {
	if len(names) != len(tensors) {
		return nil, errorf(op, fmt.Sprintf("%s%d names for %d tensors", where, len(names), len(tensors)))
	}
	seen := make(map[string]bool, len(names))
	lens := make([]int64, len(names))
	var joined strings.Builder
	for i, n := range names {
		if n == "" || seen[n] || strings.IndexByte(n, 0) >= 0 {
			return nil, errorf(op, fmt.Sprintf("%snames must be non-empty, unique and without NUL bytes, got %q", where, n))
		}
		seen[n] = true
		lens[i] = int64(len(n))
		joined.WriteString(n)
	}
	hs, err := handles(op, tensors)
	if err != nil {
		e := err.(*Error)
		return nil, &Error{Op: op, Msg: where + e.Msg, freed: e.freed}
	}
	var cnames *C.char
	if joined.Len() > 0 {
		cnames = (*C.char)(unsafe.Pointer(unsafe.StringData(joined.String())))
	}
	var buf unsafe.Pointer
	var n C.int64_t
	e := C.ldt_pickle_save(cnames, int64Ptr(lens), handlePtr(hs), C.int(len(hs)), &buf, &n)
	if err := cerr(op, e); err != nil {
		err.(*Error).Msg = where + err.(*Error).Msg
		return nil, err
	}
	defer C.ldt_free_buffer(buf)
	return bytes.Clone(unsafe.Slice((*byte)(buf), int(n))), nil
}

// LoadPickle reads a file of libtorch's pickle format holding a dict of tensors (SavePickle's,
// or Python's torch.save of a dict {str: tensor}) into new CPU tensors, whatever device the
// file names, owned by the current Scope if one is open, with their names in the dict's
// order. Any other content, and a damaged file, is refused with an error naming the file.
func LoadPickle(path string) ([]string, []*Tensor, error) {
	const op = "load_pickle"
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, &Error{Op: op, Msg: err.Error(), err: err}
	}
	if err := checkZip(data); err != nil {
		return nil, nil, &Error{Op: op, Msg: path + ": " + err.Error(), err: err}
	}
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	var n C.int
	var hs *C.ldt_tensor
	var cnames *C.char
	if err := cerr(op, C.ldt_pickle_load(p, C.int64_t(len(data)), &n, &hs, &cnames)); err != nil {
		err.(*Error).Msg = path + ": " + err.(*Error).Msg
		return nil, nil, err
	}
	defer C.ldt_free_buffer(unsafe.Pointer(hs))
	defer C.ldt_free_buffer(unsafe.Pointer(cnames))
	names := make([]string, int(n))
	ts := make([]*Tensor, int(n))
	handleList := unsafe.Slice(hs, int(n))
	q := cnames
	for i := range names {
		names[i] = C.GoString(q)
		q = (*C.char)(unsafe.Add(unsafe.Pointer(q), len(names[i])+1))
		ts[i] = wrap(handleList[i])
	}
	return names, ts, nil
}

// checkZip reads every member of the archive to its end, so that archive/zip checks each
// one's CRC-32 against the central directory, and refuses members marked as folders:
// libtorch's reader (miniz, without CRC checks) takes damaged bytes as they are, a member
// marked as a folder gives it a buffer it never fills, and a damaged header can make it read
// outside the file's buffer.
func checkZip(data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("not a torch.save archive: %w", err)
	}
	for _, f := range zr.File {
		if f.Mode().IsDir() { // no torch.save archive has folders; miniz would read none of its bytes
			return fmt.Errorf("archive member %q is marked as a folder (corrupt file?)", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("archive member %q: %w", f.Name, err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("archive member %q: %w (corrupt file?)", f.Name, err)
		}
	}
	return nil
}
