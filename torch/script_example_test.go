package torch_test

import (
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/torch"
)

// A TorchScript module's parameters, and a functional call that runs its forward with other
// tensors in their place (here zeros, and a head bias of 1, 2, 3): the module's own weights
// are back after the call.
func ExampleScriptModule_Call() {
	s := torch.NewScope()
	defer s.Close()
	m, err := torch.LoadScriptModule("../testdata/torchscript/wrapped.pt")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	params, err := m.Parameters()
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	var values []*torch.Tensor
	for _, p := range params {
		fmt.Println(p.Name, p.Owner, p.Tensor.Shape())
		v := torch.Must(torch.Zeros(p.Tensor.Shape()))
		if p.Name == "head.bias" {
			v = torch.Must(torch.FromFloat32([]float32{1, 2, 3}, 3))
		}
		names, values = append(names, p.Name), append(values, v)
	}
	x := torch.Must(torch.Ones([]int64{2, 1, 4, 4}))
	y, err := m.Call("forward", names, values, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(y.Shape(), torch.Must(y.Float32s()))
	_, err = m.Call("forward", []string{"head.bias"}, []*torch.Tensor{torch.Must(torch.Zeros([]int64{4}))}, x)
	fmt.Println(err != nil)
	// Output:
	// body.net.1.weight torch.nn.modules.linear.Linear [8 16]
	// body.net.1.bias torch.nn.modules.linear.Linear [8]
	// head.weight torch.nn.modules.linear.Linear [3 8]
	// head.bias torch.nn.modules.linear.Linear [3]
	// [2 3] [1 2 3 1 2 3]
	// true
}
