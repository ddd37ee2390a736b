package data

import (
	"bytes"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

func npzBytes(t testing.TB, arrays ...*npz.Array) []byte {
	var b bytes.Buffer
	if err := npz.WriteCompressed(&b, arrays); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadK49(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(6, 28, 28, 49, 0)
	lb[5] = 48
	ip := writeFile(t, dir, "k49-train-imgs.npz", npzBytes(t, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{6, 28, 28}, Data: px}))
	for _, labels := range []*npz.Array{
		{Name: "arr_0", DType: "uint8", Shape: []int{6}, Data: lb},
		{Name: "arr_0", DType: "int64", Shape: []int{6}, Data: []int64{0, 1, 2, 3, 4, 48}},
		{Name: "arr_0", DType: "int32", Shape: []int{6}, Data: []int32{0, 1, 2, 3, 4, 48}},
	} {
		lp := writeFile(t, dir, "k49-train-labels.npz", npzBytes(t, labels))
		r, err := ReadK49(ip, lp, 49)
		if err != nil {
			t.Fatal(err)
		}
		// pixels exactly as stored (the reference turned p into (256-p) mod 256)
		if r.N != 6 || r.H != 28 || !bytes.Equal(r.Pixels, px) || r.Labels[5] != 48 || r.Labels[4] != 4 {
			t.Errorf("%s labels: got %v", labels.DType, r.Labels)
		}
	}
}

func TestK49BadInput(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(3, 28, 28, 49, 0)
	imgs := &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{3, 28, 28}, Data: px}
	labels := &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{3}, Data: lb}
	goodI := writeFile(t, dir, "good-imgs.npz", npzBytes(t, imgs))
	goodL := writeFile(t, dir, "good-labels.npz", npzBytes(t, labels))
	badImgs := []struct {
		name string
		data []byte
		want string
	}{
		{"not-npz", []byte("hello"), "bad .npz file"},
		{"truncated", npzBytes(t, imgs)[:100], "bad .npz file"},
		{"no-arr0", npzBytes(t, &npz.Array{Name: "x", DType: "uint8", Shape: []int{3, 28, 28}, Data: px}), "no member arr_0"},
		{"float", npzBytes(t, &npz.Array{Name: "arr_0", DType: "float32", Shape: []int{1, 1, 1}, Data: []float32{1}}), "want uint8 [N, H, W]"},
		{"rank", npzBytes(t, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{3, 784}, Data: px}), "want uint8 [N, H, W]"},
	}
	for _, c := range badImgs {
		p := writeFile(t, dir, c.name+".npz", c.data)
		_, err := ReadK49(p, goodL, 49)
		wantFormatError(t, err, p, c.want)
	}
	badLabels := []struct {
		name string
		data []byte
		want string
	}{
		{"count", npzBytes(t, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{2}, Data: lb[:2]}), "2 labels for 3 images"},
		{"range", npzBytes(t, &npz.Array{Name: "arr_0", DType: "int64", Shape: []int{3}, Data: []int64{0, 49, 1}}), "label 49 of example 1 is out of range"},
		{"negative", npzBytes(t, &npz.Array{Name: "arr_0", DType: "int32", Shape: []int{3}, Data: []int32{0, -1, 1}}), "out of range"},
		{"dtype", npzBytes(t, &npz.Array{Name: "arr_0", DType: "float64", Shape: []int{3}, Data: []float64{0, 1, 2}}), "want an integer type"},
		{"rank", npzBytes(t, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{3, 1}, Data: lb}), "want [N]"},
	}
	for _, c := range badLabels {
		p := writeFile(t, dir, c.name+"-labels.npz", c.data)
		_, err := ReadK49(goodI, p, 49)
		wantFormatError(t, err, p, c.want)
	}
}

func arrU8(name string, shape []int, data []byte) *npz.Array {
	return &npz.Array{Name: name, DType: "uint8", Shape: shape, Data: data}
}

func TestLoadK49WrongImageSize(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(6, 32, 32, 49, 0)
	for _, p := range []string{"train", "test"} {
		writeFile(t, dir, "k49-"+p+"-imgs.npz", npzBytes(t, arrU8("arr_0", []int{6, 32, 32}, px)))
		writeFile(t, dir, "k49-"+p+"-labels.npz", npzBytes(t, arrU8("arr_0", []int{6}, lb)))
	}
	_, err := Load("k49", Options{Dir: dir, AllowUnknown: true})
	wantFormatError(t, err, "k49-train-imgs.npz", "images are 1x32x32, want 1x28x28")
}
