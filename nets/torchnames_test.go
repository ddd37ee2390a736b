package nets

import (
	"slices"
	"testing"
)

// TorchNames follows the reference modules' layouts (docs/ARTIFACT.md; the PyTorch side is
// checked in labeldistill/train where python3 has torch): one name per tensor, none twice.
func TestTorchNames(t *testing.T) {
	for _, c := range []struct {
		arch    string
		c, size int64
		params  []string // expected at the given positions: first, a middle one, last
		buffers []string
	}{
		{"lenet", 1, 28, []string{"conv1.weight", "fc2.bias", "fc3.bias"}, nil},
		{"alexnet", 3, 32, []string{"features.0.weight", "features.4.bias", "fc3.bias"}, nil},
		{"resnet", 3, 32, []string{"conv1.weight", "layer2.0.downsample.0.weight", "fc.bias"}, []string{"bn1.running_mean", "layer3.0.downsample.1.running_var", "layer3.1.bn2.running_var"}},
		{"convnet", 1, 28, []string{"features.0.weight", "features.9.bias", "classifier.bias"}, nil},
	} {
		n, err := New(c.arch, c.c, c.size, c.size, 10)
		if err != nil {
			t.Fatal(err)
		}
		params, buffers := n.TorchNames()
		if len(params) != len(n.Params()) || len(buffers) != len(n.Buffers) {
			t.Fatalf("%s: %d parameter names for %d, %d buffer names for %d", c.arch, len(params), len(n.Params()), len(buffers), len(n.Buffers))
		}
		all := append(slices.Clone(params), buffers...)
		if len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(all) {
			t.Fatalf("%s: a name twice: %v", c.arch, all)
		}
		for _, want := range c.params {
			if !slices.Contains(params, want) {
				t.Errorf("%s: no parameter %s in %v", c.arch, want, params)
			}
		}
		for _, want := range c.buffers {
			if !slices.Contains(buffers, want) {
				t.Errorf("%s: no buffer %s in %v", c.arch, want, buffers)
			}
		}
		if params[0] != c.params[0] || params[len(params)-1] != c.params[2] {
			t.Errorf("%s: parameters from %s to %s", c.arch, params[0], params[len(params)-1])
		}
	}
}
