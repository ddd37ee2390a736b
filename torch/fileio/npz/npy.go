// The .npy format: header parsing and formatting, and element (de)serialisation.

package npz

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// npyMagic opens every .npy file.
const npyMagic = "\x93NUMPY"

// header is a parsed .npy header.
type header struct {
	dt    dtype
	shape []int
	count int   // prod(shape)
	size  int64 // bytes of the header, magic included: the data starts here
}

// problem is an error message without file/member context; callers wrap it in *Error.
type problem struct {
	msg string
	err error
}

func (p *problem) Error() string {
	if p.err != nil {
		return p.msg + ": " + p.err.Error()
	}
	return p.msg
}

func (p *problem) Unwrap() error { return p.err }

func problemf(format string, args ...any) error {
	return &problem{msg: fmt.Sprintf(format, args...)}
}

// readHeader reads and validates an .npy header from r. avail is the number of bytes in
// the whole .npy stream (magic included), or -1 when unknown; a header that claims more
// bytes than are available is rejected before anything is allocated.
func readHeader(r io.Reader, avail int64) (*header, error) {
	var pre [10]byte
	if n, err := io.ReadFull(r, pre[:8]); err != nil {
		if n < len(npyMagic) || string(pre[:len(npyMagic)]) != npyMagic {
			return nil, problemf("bad magic: not an .npy file (%d bytes)", n)
		}
		return nil, problemf("truncated header: %d bytes", n)
	}
	if string(pre[:len(npyMagic)]) != npyMagic {
		return nil, problemf("bad magic %q: not an .npy file", pre[:len(npyMagic)])
	}
	major, minor := pre[6], pre[7]
	var hlen, prefix int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, problemf("truncated header length")
		}
		hlen, prefix = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, problemf("truncated header length")
		}
		hlen, prefix = int64(binary.LittleEndian.Uint32(l[:])), 12
	default:
		return nil, problemf("unsupported .npy format version %d.%d", major, minor)
	}
	if minor != 0 {
		return nil, problemf("unsupported .npy format version %d.%d", major, minor)
	}
	if avail >= 0 && prefix+hlen > avail {
		return nil, problemf("header length %d goes beyond the end of the data (%d bytes)", hlen, avail)
	}
	// A header beyond 1 MiB is not something NumPy writes; refuse it rather than
	// allocating on a stream of unknown length.
	if hlen > 1<<20 {
		return nil, problemf("header length %d is implausibly large", hlen)
	}
	text := make([]byte, hlen)
	if n, err := io.ReadFull(r, text); err != nil {
		return nil, problemf("truncated header: %d of %d bytes", n, hlen)
	}
	if major < 3 {
		for _, c := range text {
			if c >= 0x80 {
				return nil, problemf("non-ASCII byte in a version %d.0 header", major)
			}
		}
	}
	h, err := parseHeader(string(text))
	if err != nil {
		return nil, err
	}
	h.size = prefix + hlen
	return h, nil
}

// parseHeader parses the Python dict literal of an .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
func parseHeader(text string) (*header, error) {
	p := &dictParser{s: text}
	descr, fortran, shape, err := p.parse()
	if err != nil {
		return nil, problemf("bad header %q: %v", truncate(text, 120), err)
	}
	dt, err := parseDescr(descr)
	if err != nil {
		return nil, err
	}
	if fortran {
		return nil, problemf("fortran_order=True is not supported (write the array in C order)")
	}
	count, err := numElements(shape, dt.size)
	if err != nil {
		return nil, problemf("%v", err)
	}
	return &header{dt: dt, shape: shape, count: count}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// parseDescr maps a NumPy descr string to a supported dtype.
func parseDescr(descr string) (dtype, error) {
	if len(descr) < 2 {
		return dtype{}, problemf("unsupported dtype %q", descr)
	}
	order, rest := descr[0], descr[1:]
	if order != '<' && order != '>' && order != '|' && order != '=' {
		order, rest = 0, descr
	}
	kind := rest[0]
	switch kind {
	case 'O':
		return dtype{}, problemf("unsupported dtype %q: object arrays (pickled Python objects) are not supported", descr)
	case 'U', 'S', 'a', 'V', 'M', 'm':
		return dtype{}, problemf("unsupported dtype %q: strings, void, datetime and timedelta arrays are not supported", descr)
	}
	var want dtype
	found := false
	for _, d := range dtypes {
		if d.descr[1:] == rest {
			want, found = d, true
		}
	}
	if !found {
		return dtype{}, problemf("unsupported dtype %q (supported: <f4 <f8 <i4 <i8 |u1 |b1)", descr)
	}
	switch {
	case order == '>' && want.size > 1:
		return dtype{}, problemf("unsupported dtype %q: big-endian data is not supported", descr)
	case order == '=' && want.size > 1:
		return dtype{}, problemf("unsupported dtype %q: native byte order is ambiguous in a file; expected '<'", descr)
	case order == 0:
		return dtype{}, problemf("unsupported dtype %q: missing byte-order character", descr)
	case order == '|' && want.size > 1:
		return dtype{}, problemf("unsupported dtype %q: '|' is only valid for 1-byte types", descr)
	}
	return want, nil
}

// dictParser is a strict parser for the small subset of Python literal syntax that .npy
// headers use: a dict with the keys 'descr' (a string), 'fortran_order' (True/False) and
// 'shape' (a tuple of non-negative ints, Python 2's "3L" accepted).
type dictParser struct {
	s   string
	pos int
}

func (p *dictParser) skipSpace() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *dictParser) peek() byte {
	p.skipSpace()
	if p.pos >= len(p.s) {
		return 0
	}
	return p.s[p.pos]
}

func (p *dictParser) expect(c byte) error {
	if p.peek() != c {
		return fmt.Errorf("expected %q at offset %d", c, p.pos)
	}
	p.pos++
	return nil
}

func (p *dictParser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", fmt.Errorf("expected a string at offset %d", p.pos)
	}
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at offset %d", p.pos)
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", fmt.Errorf("escape sequences are not supported in header strings")
	}
	p.pos += end + 2
	return v, nil
}

func (p *dictParser) ident() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) && (p.s[p.pos] >= 'A' && p.s[p.pos] <= 'Z' || p.s[p.pos] >= 'a' && p.s[p.pos] <= 'z') {
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *dictParser) shape() ([]int, error) {
	if err := p.expect('('); err != nil {
		return nil, fmt.Errorf("shape must be a tuple: %v", err)
	}
	shape := []int{}
	trailingComma := false
	for p.peek() != ')' {
		if p.pos >= len(p.s) {
			return nil, fmt.Errorf("unterminated shape tuple")
		}
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		if p.pos == start {
			return nil, fmt.Errorf("expected a non-negative integer in shape at offset %d", start)
		}
		d, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
		if err != nil || d > maxBytes {
			return nil, fmt.Errorf("shape dimension %q is out of range", p.s[start:p.pos])
		}
		if p.pos < len(p.s) && p.s[p.pos] == 'L' {
			p.pos++
		}
		shape = append(shape, int(d))
		if len(shape) > 64 {
			return nil, fmt.Errorf("shape has more than 64 dimensions")
		}
		trailingComma = false
		if p.peek() == ',' {
			p.pos++
			trailingComma = true
		} else if p.peek() != ')' {
			return nil, fmt.Errorf("expected ',' or ')' in shape at offset %d", p.pos)
		}
	}
	p.pos++
	if len(shape) == 1 && !trailingComma {
		return nil, fmt.Errorf("shape (%d) is not a tuple (a 1-tuple needs a trailing comma)", shape[0])
	}
	return shape, nil
}

func (p *dictParser) parse() (descr string, fortran bool, shape []int, err error) {
	if err = p.expect('{'); err != nil {
		return
	}
	seen := map[string]bool{}
	for p.peek() != '}' {
		if p.pos >= len(p.s) {
			err = fmt.Errorf("unterminated dict")
			return
		}
		var key string
		if key, err = p.str(); err != nil {
			return
		}
		if seen[key] {
			err = fmt.Errorf("duplicate key %q", key)
			return
		}
		seen[key] = true
		if err = p.expect(':'); err != nil {
			return
		}
		switch key {
		case "descr":
			if c := p.peek(); c == '[' || c == '(' || c == '{' {
				err = fmt.Errorf("structured dtypes are not supported")
				return
			}
			if descr, err = p.str(); err != nil {
				return
			}
		case "fortran_order":
			switch id := p.ident(); id {
			case "True":
				fortran = true
			case "False":
				fortran = false
			default:
				err = fmt.Errorf("fortran_order must be True or False, got %q", id)
				return
			}
		case "shape":
			if shape, err = p.shape(); err != nil {
				return
			}
		default:
			err = fmt.Errorf("unexpected key %q", key)
			return
		}
		if p.peek() == ',' {
			p.pos++
		} else if p.peek() != '}' {
			err = fmt.Errorf("expected ',' or '}' at offset %d", p.pos)
			return
		}
	}
	p.pos++
	if p.peek() != 0 {
		err = fmt.Errorf("unexpected text after the dict at offset %d", p.pos)
		return
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			err = fmt.Errorf("missing key %q", k)
			return
		}
	}
	return
}

// readNPY reads one .npy stream. avail is the total number of bytes in the stream, or
// -1 when unknown; with a known size the data must fill the stream exactly.
func readNPY(r io.Reader, avail int64) (*Array, error) {
	h, err := readHeader(r, avail)
	if err != nil {
		return nil, err
	}
	need := int64(h.count) * int64(h.dt.size)
	if avail >= 0 && h.size+need != avail {
		return nil, problemf("shape %s of %s needs %d bytes of data, but %d bytes follow the header",
			formatShape(h.shape), h.dt.descr, need, avail-h.size)
	}
	data, err := readData(r, h.dt, h.count, avail >= 0)
	if err != nil {
		return nil, err
	}
	// Nothing may follow the data.
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	if n != 0 {
		return nil, problemf("extra bytes after the %d bytes of array data", need)
	}
	if err != nil && err != io.EOF {
		// For a zip member this is where the CRC is checked.
		return nil, &problem{msg: "reading the end of the array data", err: err}
	}
	return &Array{DType: h.dt.name, Shape: h.shape, Data: data}, nil
}

// chunkBytes is the read granularity for element decoding.
const chunkBytes = 1 << 16

// readData reads count elements of dt. When sized is false the input length is unknown,
// so memory grows with the bytes actually read instead of being allocated up front.
func readData(r io.Reader, dt dtype, count int, sized bool) (any, error) {
	truncated := func(got int) error {
		return problemf("truncated data: %d of %d elements", got, count)
	}
	switch dt.name {
	case "uint8", "bool":
		var buf []byte
		if sized {
			buf = make([]byte, count)
			if n, err := io.ReadFull(r, buf); err != nil {
				return nil, wrapRead(truncated(n), err)
			}
		} else {
			var err error
			buf, err = io.ReadAll(io.LimitReader(r, int64(count)))
			if err != nil {
				return nil, wrapRead(truncated(len(buf)), err)
			}
			if len(buf) != count {
				return nil, truncated(len(buf))
			}
		}
		if dt.name == "uint8" {
			return buf, nil
		}
		out := make([]bool, count)
		for i, b := range buf {
			switch b {
			case 0:
			case 1:
				out[i] = true
			default:
				return nil, problemf("bool element %d has byte value %d (must be 0 or 1)", i, b)
			}
		}
		return out, nil
	case "float32":
		return decode(r, count, 4, sized, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case "float64":
		return decode(r, count, 8, sized, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	case "int32":
		return decode(r, count, 4, sized, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case "int64":
		return decode(r, count, 8, sized, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	}
	return nil, problemf("internal: no decoder for %s", dt.name)
}

// wrapRead keeps a decompression/checksum error visible behind a truncation message.
func wrapRead(p error, err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p
	}
	return &problem{msg: p.Error(), err: err}
}

func decode[T any](r io.Reader, count, size int, sized bool, conv func([]byte) T) ([]T, error) {
	var out []T
	if sized {
		out = make([]T, 0, count)
	}
	buf := make([]byte, chunkBytes)
	for len(out) < count {
		m := min(count-len(out), chunkBytes/size)
		b := buf[:m*size]
		if n, err := io.ReadFull(r, b); err != nil {
			return nil, wrapRead(problemf("truncated data: %d of %d elements", len(out)+n/size, count), err)
		}
		for i := 0; i < len(b); i += size {
			out = append(out, conv(b[i:i+size]))
		}
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// headerBytes returns the complete .npy header (magic, version, length, dict, padding)
// for an array, padded so that the data starts at a multiple of 64 bytes.
func headerBytes(dt dtype, shape []int) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dt.descr, formatShape(shape))
	var b bytes.Buffer
	b.WriteString(npyMagic)
	prefix := 10
	if len(dict)+1+10 > math.MaxUint16 {
		prefix = 12
	}
	total := prefix + len(dict) + 1
	pad := (64 - total%64) % 64
	hlen := len(dict) + pad + 1
	if prefix == 10 {
		b.Write([]byte{1, 0})
		b.Write(binary.LittleEndian.AppendUint16(nil, uint16(hlen)))
	} else {
		b.Write([]byte{2, 0})
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(hlen)))
	}
	b.WriteString(dict)
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteByte('\n')
	return b.Bytes()
}

// writeNPY writes a validated array as an .npy stream.
func writeNPY(w io.Writer, a *Array) error {
	dt, _ := dtypeByName(a.DType)
	bw := bufio.NewWriterSize(w, chunkBytes)
	if _, err := bw.Write(headerBytes(dt, a.Shape)); err != nil {
		return err
	}
	var err error
	switch v := a.Data.(type) {
	case []uint8:
		_, err = bw.Write(v)
	case []bool:
		for _, x := range v {
			var c byte
			if x {
				c = 1
			}
			if err = bw.WriteByte(c); err != nil {
				break
			}
		}
	case []float32:
		err = encode(bw, v, 4, func(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) })
	case []float64:
		err = encode(bw, v, 8, func(b []byte, x float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(x)) })
	case []int32:
		err = encode(bw, v, 4, func(b []byte, x int32) { binary.LittleEndian.PutUint32(b, uint32(x)) })
	case []int64:
		err = encode(bw, v, 8, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

func encode[T any](w io.Writer, v []T, size int, put func([]byte, T)) error {
	buf := make([]byte, chunkBytes)
	for len(v) > 0 {
		m := min(len(v), chunkBytes/size)
		for i, x := range v[:m] {
			put(buf[i*size:], x)
		}
		if _, err := w.Write(buf[:m*size]); err != nil {
			return err
		}
		v = v[m:]
	}
	return nil
}
