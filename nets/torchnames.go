package nets

// torchnames.go: the names PyTorch gives each network's parameters and buffers in the
// module definitions of docs/ARTIFACT.md, which follow the reference code's module layouts:
// the authors' LeNet (conv1, conv2, fc1, fc2, fc3), AlexCifarNet (a features Sequential with
// the convolutions at 0 and 4, then fc1, fc2, fc3) and CIFAR ResNet (conv1, bn1,
// layerS.B.{conv1,bn1,conv2,bn2,downsample.0,downsample.1}, fc), and the dataset-condensation
// ConvNet (a features Sequential of conv, norm, act, pool per block, then classifier).

import (
	"fmt"
	"strconv"
	"strings"
)

// TorchNames returns the PyTorch names of n's parameters, in Params order (the body's first
// len(Body), then the head's), and of its buffers, in Buffers order.
func (n *Net) TorchNames() (params, buffers []string) {
	for _, p := range n.Params() {
		params = append(params, n.torchName(p.Name))
	}
	for _, b := range n.Buffers {
		buffers = append(buffers, n.torchName(b.Name))
	}
	return params, buffers
}

// torchName maps one of n's names ("conv1.weight", "fc.bias", …) to PyTorch's. A
// TorchScript network's names are its module's already.
func (n *Net) torchName(name string) string {
	if n.script != nil {
		return name
	}
	module, leaf, _ := cutLast(name)
	switch n.Arch {
	case "lenet":
		if module == "fc" {
			module = "fc3"
		}
	case "alexnet":
		switch module {
		case "conv1":
			module = "features.0"
		case "conv2":
			module = "features.4"
		case "fc":
			module = "fc3"
		}
	case "resnet":
		module = strings.Replace(module, ".shortcut.", ".downsample.", 1)
	case "convnet":
		// block d (1-based) is features.4(d−1) (conv), .4(d−1)+1 (norm), then ReLU and pool
		if module == "fc" {
			module = "classifier"
		} else if d, ok := blockIndex(module, "conv"); ok {
			module = fmt.Sprintf("features.%d", 4*(d-1))
		} else if d, ok := blockIndex(module, "norm"); ok {
			module = fmt.Sprintf("features.%d", 4*(d-1)+1)
		}
	}
	return module + "." + leaf
}

// cutLast splits "a.b.c" into "a.b" and "c".
func cutLast(name string) (before, after string, found bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", name, false
	}
	return name[:i], name[i+1:], true
}

// blockIndex reads d from a module name prefix+d ("conv2" → 2).
func blockIndex(module, prefix string) (int, bool) {
	digits, ok := strings.CutPrefix(module, prefix)
	if !ok {
		return 0, false
	}
	d, err := strconv.Atoi(digits)
	return d, err == nil && d >= 1
}
