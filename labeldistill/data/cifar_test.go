package data

import (
	"slices"
	"testing"
)

func TestReadCIFAR(t *testing.T) {
	dir := t.TempDir()
	b1 := writeFile(t, dir, "data_batch_1.bin", cifarBytes(3, false, func(i int) (byte, byte) { return 0, byte(i) }))
	b2 := writeFile(t, dir, "data_batch_2.bin.gz", gz(cifarBytes(2, false, func(i int) (byte, byte) { return 0, byte(9 - i) })))
	r, err := ReadCIFAR([]string{b1, b2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 5 || r.C != 3 || r.H != 32 || r.Classes != 10 {
		t.Fatalf("got %+v", r)
	}
	if want := []int64{0, 1, 2, 9, 8}; !slices.Equal(r.Labels, want) {
		t.Errorf("labels %v, want %v", r.Labels, want)
	}
	// image 3 (first of batch 2): R plane 0, G plane 50, B plane 100
	img := r.Pixels[3*cifarPixels : 4*cifarPixels]
	if img[0] != 0 || img[1024] != 50 || img[2048+5] != 100 {
		t.Errorf("pixels %d %d %d", img[0], img[1024], img[2048+5])
	}
	c100 := writeFile(t, dir, "train.bin", cifarBytes(4, true, func(i int) (byte, byte) { return byte(19 - i), byte(90 + i) }))
	r, err = ReadCIFAR([]string{c100}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{90, 91, 92, 93}; r.Classes != 100 || !slices.Equal(r.Labels, want) {
		t.Errorf("cifar100 labels %v", r.Labels)
	}
}

func TestCIFARBadInput(t *testing.T) {
	dir := t.TempDir()
	good := cifarBytes(2, false, func(i int) (byte, byte) { return 0, 1 })
	cases := []struct {
		name    string
		data    []byte
		fine100 bool
		want    string
	}{
		{"empty", nil, false, "empty file"},
		{"partial", good[:len(good)-10], false, "not a multiple of the 3073-byte record (1 whole records and 3063 bytes left over)"},
		{"c100 size", good, true, "not a multiple of the 3074-byte record"},
		{"label", cifarBytes(2, false, func(i int) (byte, byte) { return 0, byte(10 * i) }), false, "record 1: label 10 is out of range [0, 10)"},
		{"fine", cifarBytes(2, true, func(i int) (byte, byte) { return 0, byte(100 * i) }), true, "record 1: label 100 is out of range [0, 100)"},
		{"coarse", cifarBytes(2, true, func(i int) (byte, byte) { return 20, 1 }), true, "record 0: coarse label 20"},
		{"truncated gzip", gz(good)[:30], false, "truncated gzip stream"},
	}
	for _, c := range cases {
		p := writeFile(t, dir, c.name, c.data)
		_, err := ReadCIFAR([]string{p}, c.fine100)
		wantFormatError(t, err, p, c.want)
	}
	if _, err := ReadCIFAR(nil, false); err == nil {
		t.Error("no files accepted")
	}
}
