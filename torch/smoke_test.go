package torch

import "testing"

func TestSmoke(t *testing.T) {
	info, err := RuntimeInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", info)
	a := Must(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	b := Must(FromFloat32([]float32{1, 0, 0, 1, 1, 1}, 3, 2))
	c := Must(a.Mm(b))
	v := Must(c.Float32s())
	t.Log(v, c)
	_, err = a.Mm(a)
	t.Log("expected error:", err)
	x := Must(Randn([]int64{4, 3}, nil, WithRequiresGrad(), WithDType(Double)))
	y := Must(Must(x.Square()).Sum())
	g := Must(Grad([]*Tensor{y}, []*Tensor{x}, GradOpts{CreateGraph: true}))
	t.Log(g[0], Must(g[0].Float64s()))
	a.Free()
	_, err = a.Add(b)
	t.Log("after free:", err)
}
