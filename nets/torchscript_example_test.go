package nets_test

import (
	"fmt"
	"log"
	"slices"

	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// A network from a TorchScript file (here nets' LeNet as scripts/export_torchscript.py
// --lenet exports it) is used like any other: fresh parameters from a seed, Forward on
// explicit parameters. Its parameters are the module's, its head is head.weight and
// head.bias, and with the same seed it starts and computes as nets' own LeNet.
func ExampleNew_torchScript() {
	s := torch.NewScope()
	defer s.Close()
	net, err := nets.New("torchscript:../testdata/torchscript/lenet.pt", 1, 28, 28, 10)
	if err != nil {
		log.Fatal(err)
	}
	defer net.Close()
	lenet, err := nets.New("lenet", 1, 28, 28, 10)
	if err != nil {
		log.Fatal(err)
	}
	logits := func(n *nets.Net) []float32 {
		gen := torch.Must(torch.NewGenerator(1234))
		defer gen.Close()
		m, err := nets.NewModel(n, gen, torch.CPU)
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		x := torch.Must(torch.Ones([]int64{4, 1, 28, 28}))
		y, err := n.Forward(m.Params, m.Buffers, x, false)
		if err != nil {
			log.Fatal(err)
		}
		return torch.Must(y.Float32s())
	}
	head := net.Head()
	fmt.Println(len(net.Body), "body tensors, features", net.FeatureDim, "head", head[0].Name, head[0].Shape, head[1].Name)
	fmt.Println("same logits as nets' LeNet:", slices.Equal(logits(net), logits(lenet)))
	// Output:
	// 8 body tensors, features 84 head head.weight [10 84] head.bias
	// same logits as nets' LeNet: true
}
