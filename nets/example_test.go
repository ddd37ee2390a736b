package nets_test

import (
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// A network is a description (its layers' shapes) plus a function of explicitly passed
// parameters: New describes LeNet for MNIST-shaped inputs, NewModel draws its parameters
// from a seeded generator, Forward maps a batch of images to logits.
func ExampleNew() {
	s := torch.NewScope()
	defer s.Close()
	net, err := nets.New("lenet", 1, 28, 28, 10)
	if err != nil {
		log.Fatal(err)
	}
	gen, err := torch.NewGenerator(1234)
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close()
	m, err := nets.NewModel(net, gen, torch.CPU)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	count := 0
	for _, p := range m.Params {
		count += int(p.Numel())
	}
	x, err := torch.Zeros([]int64{4, 1, 28, 28})
	if err != nil {
		log.Fatal(err)
	}
	logits, err := net.Forward(m.Params, m.Buffers, x, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(net.Arch, len(m.Params), "parameter tensors,", count, "parameters")
	fmt.Println("logits", logits.Shape())
	// A batch of the wrong shape is an error, not a crash.
	_, err = net.Forward(m.Params, m.Buffers, logits, false)
	fmt.Println(err != nil)
	// Output:
	// lenet 10 parameter tensors, 61706 parameters
	// logits [4 10]
	// true
}
