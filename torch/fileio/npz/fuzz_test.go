package npz

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read: it must return an array set or an *Error,
// never panic, and whatever it returns must survive a write/read round trip.
// Seeds: every NumPy-written file in testdata plus our own writer's output.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.np[yz]")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, compressed := range []bool{false, true} {
		var buf bytes.Buffer
		w := Write
		if compressed {
			w = WriteCompressed
		}
		if err := w(&buf, sampleArrays()[:3]); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(npyV1("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1), }", []byte{7, 9}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, x := range a.Arrays {
			if x.Name == "" {
				x.Name = "bare"
			}
			if err := x.validate(); err != nil {
				t.Fatalf("read an invalid array: %v", err)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, a.Arrays); err != nil {
			t.Fatalf("cannot write what was read: %v", err)
		}
		b, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("cannot re-read: %v", err)
		}
		if len(b.Arrays) != len(a.Arrays) {
			t.Fatalf("round trip changed the array count")
		}
	})
}
