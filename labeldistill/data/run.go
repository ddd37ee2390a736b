package data

// run.go: the data of one run: the target task's splits, already normalised, and the base
// examples.

import "fmt"

// Run is everything a distillation needs: the target task's splits and the base examples, each a
// Split of normalised images (N×C×H×W float32, row-major) and int64 labels.
type Run struct {
	Target, Source string
	Classes        int      // of the target task (the label space)
	Shape          [3]int64 // C, H, W
	TargetSet      Split    // what the meta-loop's outer batches are drawn from
	Validation     Split
	Test           Split
	Base           Split   // base examples; Labels are true labels (target space within-dataset; source labels cross-dataset)
	BaseIndices    []int64 // indices of the base examples in the source's train split (file order)
	Files          map[string]string
	// Warnings are the data package's notes on the data read (unknown checksums accepted,
	// a subset layout, a JPEG copy, adapted split sizes).
	Warnings []string
	// NormMean and NormStd are the target's per-channel normalisation as applied (an image
	// folder's are computed from its train images unless given).
	NormMean, NormStd []float64
}

// ImageSize is the number of values of one image.
func (d *Run) ImageSize() int { return int(d.Shape[0] * d.Shape[1] * d.Shape[2]) }

// Check verifies the buffers agree with the declared shape and label range.
func (d *Run) Check() error {
	if d.Classes < 2 {
		return fmt.Errorf("dataset: need at least 2 classes, got %d", d.Classes)
	}
	for _, p := range []struct {
		name string
		s    *Split
		lab  bool
	}{{"target set", &d.TargetSet, true}, {"validation", &d.Validation, true}, {"test", &d.Test, true}, {"base", &d.Base, false}} {
		if p.s.N == 0 {
			return fmt.Errorf("dataset: the %s split is empty", p.name)
		}
		if p.s.N != len(p.s.Labels) || [3]int64{int64(p.s.C), int64(p.s.H), int64(p.s.W)} != d.Shape {
			return fmt.Errorf("dataset: the %s split says %d images of %d×%d×%d with %d labels, the dataset's images are %v", p.name, p.s.N, p.s.C, p.s.H, p.s.W, len(p.s.Labels), d.Shape)
		}
		if len(p.s.Images) != p.s.N*d.ImageSize() {
			return fmt.Errorf("dataset: the %s split has %d floats for %d images of %v", p.name, len(p.s.Images), p.s.N, d.Shape)
		}
		if p.lab {
			for i, y := range p.s.Labels {
				if y < 0 || y >= int64(d.Classes) {
					return fmt.Errorf("dataset: %s label %d at index %d is outside 0..%d", p.name, y, i, d.Classes-1)
				}
			}
		}
	}
	return nil
}
