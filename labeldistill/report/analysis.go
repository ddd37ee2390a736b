package report

// analysis.go: the numbers behind the figures, computed from an artifact alone: the mean
// distilled label per original class, how often a label's arg-max recovers the class, and
// the label-weighted pixel combinations of the base images (the paper's "reconstructed
// images").

import (
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
)

// LabelDistribution is the mean distilled label of the base examples of each original
// class: Mean[s][c] over the base examples whose true (source) class is s; Count[s] of them.
type LabelDistribution struct {
	Mean  [][]float64
	Count []int
}

// MeanLabelPerClass averages the label rows (n × classes) by the examples' source classes
// (0..sourceClasses-1).
func MeanLabelPerClass(labels []float32, classes int, baseClasses []int64, sourceClasses int) (LabelDistribution, error) {
	n := len(baseClasses)
	if classes < 1 || len(labels) != n*classes {
		return LabelDistribution{}, fmt.Errorf("report: %d label values for %d base examples × %d classes", len(labels), n, classes)
	}
	d := LabelDistribution{Mean: make([][]float64, sourceClasses), Count: make([]int, sourceClasses)}
	for s := range d.Mean {
		d.Mean[s] = make([]float64, classes)
	}
	for i, s := range baseClasses {
		if s < 0 || int(s) >= sourceClasses {
			return LabelDistribution{}, fmt.Errorf("report: base example %d has class %d outside 0..%d", i, s, sourceClasses-1)
		}
		d.Count[s]++
		for c := 0; c < classes; c++ {
			d.Mean[s][c] += float64(labels[i*classes+c])
		}
	}
	for s := range d.Mean {
		if d.Count[s] > 0 {
			for c := range d.Mean[s] {
				d.Mean[s][c] /= float64(d.Count[s])
			}
		}
	}
	return d, nil
}

// Recovered counts the base examples whose label's arg-max is their true class (within a
// dataset, where source and target classes are the same).
func Recovered(labels []float32, classes int, baseClasses []int64) int {
	k := 0
	argmax := ArgMaxClasses(labels, classes)
	for i, s := range baseClasses {
		if argmax[i] == s {
			k++
		}
	}
	return k
}

// Pixels undoes the normalisation of images (n × C×H×W, normalised as norm says) back to
// [0, 1] intensities (clamped).
func Pixels(images []float32, channels, size int, norm artifact.Normalisation) ([]float64, error) {
	if len(norm.Mean) != channels || len(norm.Std) != channels {
		return nil, fmt.Errorf("report: normalisation %v / %v does not fit %d channels", norm.Mean, norm.Std, channels)
	}
	if size <= 0 || len(images)%(channels*size) != 0 {
		return nil, fmt.Errorf("report: %d values are not whole images of %d×%d", len(images), channels, size)
	}
	out := make([]float64, len(images))
	for i, v := range images {
		c := (i / size) % channels
		out[i] = math.Min(1, math.Max(0, float64(v)*norm.Std[c]+norm.Mean[c]))
	}
	return out, nil
}

// Reconstruct returns, for every target class c, the label-weighted combination of the
// base images: R_c = Σ_i y_ic x_i / Σ_i y_ic (pixels as given, n images of imageSize
// values; labels n × classes). A class no label gives weight to yields a zero image.
func Reconstruct(pixels []float64, imageSize int, labels []float32, classes int) ([][]float64, error) {
	if imageSize <= 0 || classes < 1 || len(pixels)%imageSize != 0 {
		return nil, fmt.Errorf("report: %d pixel values are not whole images of %d", len(pixels), imageSize)
	}
	n := len(pixels) / imageSize
	if len(labels) != n*classes {
		return nil, fmt.Errorf("report: %d label values for %d images × %d classes", len(labels), n, classes)
	}
	out := make([][]float64, classes)
	for c := range out {
		r := make([]float64, imageSize)
		total := 0.0
		for i := 0; i < n; i++ {
			w := float64(labels[i*classes+c])
			if w == 0 {
				continue
			}
			total += w
			img := pixels[i*imageSize : (i+1)*imageSize]
			for p, v := range img {
				r[p] += w * v
			}
		}
		if total > 0 {
			for p := range r {
				r[p] /= total
			}
		}
		out[c] = r
	}
	return out, nil
}

// ArgMaxClasses returns each label row's arg-max class (the first of equal maxima).
func ArgMaxClasses(labels []float32, classes int) []int64 {
	out := make([]int64, len(labels)/classes)
	for i := range out {
		best := 0
		for c := 1; c < classes; c++ {
			if labels[i*classes+c] > labels[i*classes+best] {
				best = c
			}
		}
		out[i] = int64(best)
	}
	return out
}
