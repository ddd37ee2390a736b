package torch_test

import (
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/torch"
)

// A Scope frees every tensor made while it is the innermost one; Keep hands a tensor to
// the enclosing scope, so a result outlives the scratch work that made it.
func ExampleScope() {
	outer := torch.NewScope()
	defer outer.Close()
	var sum *torch.Tensor
	func() {
		s := torch.NewScope()
		defer s.Close() // frees x and its square
		x, err := torch.FromFloat32([]float32{1, 2, 3}, 3)
		if err != nil {
			log.Fatal(err)
		}
		sq, err := x.Square()
		if err != nil {
			log.Fatal(err)
		}
		if sum, err = sq.Sum(); err != nil {
			log.Fatal(err)
		}
		s.Keep(sum) // now outer's
	}()
	v, err := sum.Item()
	fmt.Println(v, err)
	// Output:
	// 14 <nil>
}

// A Chain keeps the first error of a sequence of calls, so model code reads as a formula
// and is checked once; after an error, later calls get nil tensors and fail without
// running.
func ExampleChain() {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	x := c.T(torch.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	y := c.T(torch.FromFloat32([]float32{1, 1}, 2)) // wrong shape for a matrix product
	z := c.T(x.Mm(y))
	_ = c.T(z.Sum())
	fmt.Println(c.Err() != nil)
	// Output:
	// true
}

// Grad with CreateGraph records the gradient's own computation, so it can be differentiated
// again: for f(x) = x³ at x = 2, f′ = 3x² = 12 and f″ = 6x = 12.
func ExampleGrad() {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	x := c.T(torch.Full([]int64{1}, 2, torch.WithDType(torch.Double), torch.WithRequiresGrad()))
	f := c.T(c.T(x.PowScalar(3)).Sum())
	if c.Err() != nil {
		log.Fatal(c.Err())
	}
	g, err := torch.Grad([]*torch.Tensor{f}, []*torch.Tensor{x}, torch.GradOpts{CreateGraph: true})
	if err != nil {
		log.Fatal(err)
	}
	gsum, err := g[0].Sum()
	if err != nil {
		log.Fatal(err)
	}
	h, err := torch.Grad([]*torch.Tensor{gsum}, []*torch.Tensor{x}, torch.GradOpts{})
	if err != nil {
		log.Fatal(err)
	}
	d1, _ := g[0].Item()
	d2, _ := h[0].Item()
	fmt.Println(d1, d2)
	// Output:
	// 12 12
}
