package artifact

// reliability_test.go: tampered or truncated artifacts are rejected by Read with an error
// (never a panic); non-finite labels are never written.

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// smallArtifactResult is a valid 20-example MNIST result (a report consistent with it).
func smallArtifactResult() *labeldistill.Result {
	const n, classes = 20, 10
	cfg := config.Default()
	cfg.BaseExamples = n
	cfg, err := cfg.Resolved()
	if err != nil {
		panic(err)
	}
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 7, MetaSteps: 7}, Classes: classes, BaseShape: [4]int64{n, 1, 28, 28}}
	res.BaseImages = make([]float32, n*28*28)
	for i := range res.BaseImages {
		res.BaseImages[i] = float32(i%17) / 17
	}
	res.Labels = make([]float32, n*classes)
	for r := 0; r < n; r++ {
		for c := 0; c < classes; c++ {
			res.Labels[r*classes+c] = 0.05
		}
		res.Labels[r*classes+r%classes] = 0.55
	}
	res.BaseIndices = make([]int64, n)
	for i := range res.BaseIndices {
		res.BaseIndices[i] = int64(3 * i)
	}
	return res
}

func TestReadArtifactRejectsTampering(t *testing.T) {
	dir := t.TempDir()
	res := smallArtifactResult()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	good, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(good.Labels, res.Labels) || good.Report == nil || good.Report.T != 7 {
		t.Fatalf("round trip: %+v", good)
	}
	arc, err := npz.ReadFile(filepath.Join(dir, DistilledFile))
	if err != nil {
		t.Fatal(err)
	}
	orig := map[string]*npz.Array{}
	for _, a := range arc.Arrays {
		orig[a.Name] = a
	}
	labels := func(edit func(v []float32)) *npz.Array {
		v := slices.Clone(orig["labels"].Data.([]float32))
		edit(v)
		return &npz.Array{Name: "labels", DType: "float32", Shape: []int{20, 10}, Data: v}
	}
	for _, tc := range []struct {
		name   string
		arrays []*npz.Array
		want   string
	}{
		{"labels with a row too many", []*npz.Array{orig["images"], {Name: "labels", DType: "float32", Shape: []int{21, 10}, Data: make([]float32, 210)}}, "matching 20 images"},
		{"one-dimensional labels", []*npz.Array{orig["images"], {Name: "labels", DType: "float32", Shape: []int{200}, Data: orig["labels"].Data}}, "N×classes"},
		{"a single class", []*npz.Array{orig["images"], {Name: "labels", DType: "float32", Shape: []int{20, 1}, Data: make([]float32, 20)}}, "N×classes"},
		{"float64 labels", []*npz.Array{orig["images"], {Name: "labels", DType: "float64", Shape: []int{20, 10}, Data: make([]float64, 200)}}, "float32"},
		{"a NaN label", []*npz.Array{orig["images"], labels(func(v []float32) { v[57] = float32(math.NaN()) })}, "row 5"},
		{"an infinite label", []*npz.Array{orig["images"], labels(func(v []float32) { v[3] = float32(math.Inf(1)) })}, "row 0"},
		{"a negative label", []*npz.Array{orig["images"], labels(func(v []float32) { v[120], v[121] = -0.1, 0.15+0.05 })}, "row 12"},
		{"a row summing to 0.9", []*npz.Array{orig["images"], labels(func(v []float32) { v[199] -= 0.1 })}, "row 19 sums to"},
		{"an all-zero row", []*npz.Array{orig["images"], labels(func(v []float32) { clear(v[40:50]) })}, "row 4 sums to"},
		{"a NaN pixel", []*npz.Array{{Name: "images", DType: "float32", Shape: []int{20, 1, 28, 28}, Data: func() []float32 {
			v := slices.Clone(orig["images"].Data.([]float32))
			v[33] = float32(math.NaN())
			return v
		}()}, orig["labels"]}, "non-finite"},
		{"three-dimensional images", []*npz.Array{{Name: "images", DType: "float32", Shape: []int{20, 28, 28}, Data: orig["images"].Data}, orig["labels"]}, "N×C×H×W"},
		{"no labels", []*npz.Array{orig["images"]}, "needs arrays"},
		{"an unknown array", []*npz.Array{orig["images"], orig["labels"], {Name: "base_indicez", DType: "int64", Shape: []int{20}, Data: orig["base_indices"].Data}}, "unexpected array"},
		{"float base indices", []*npz.Array{orig["images"], orig["labels"], {Name: "base_indices", DType: "float32", Shape: []int{20}, Data: make([]float32, 20)}}, "base_indices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if err := npz.WriteFile(filepath.Join(d, DistilledFile), tc.arrays); err != nil {
				t.Fatal(err)
			}
			_, err := Read(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}

	t.Run("corrupt report", func(t *testing.T) {
		d := t.TempDir()
		if err := Write(d, res); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ReportFile), []byte(`{"steps": "seven"`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(d); err == nil || !strings.Contains(err.Error(), ReportFile) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("truncated and bit-flipped", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, DistilledFile))
		if err != nil {
			t.Fatal(err)
		}
		d := t.TempDir()
		path := filepath.Join(d, DistilledFile)
		try := func(b []byte) (*Artifact, error) {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return Read(d)
		}
		for n := 0; n < len(data); n += 1 + n/8 {
			if _, err := try(data[:n]); err == nil {
				t.Fatalf("truncated to %d of %d bytes: accepted", n, len(data))
			}
		}
		caught, total := 0, 0
		for p := 0; p < len(data); p += 7 {
			b := slices.Clone(data)
			b[p] ^= 0x40
			total++
			a, err := try(b)
			if err != nil {
				caught++
				continue
			}
			// Accepted: then the flip touched no value (a zip timestamp, padding spaces...).
			if !slices.Equal(a.Labels, good.Labels) || !slices.Equal(a.Images, good.Images) || !slices.Equal(a.BaseIndices, good.BaseIndices) {
				t.Fatalf("flip at byte %d changed the content and was accepted", p)
			}
		}
		t.Logf("%d-byte artifact: every truncation rejected; %d of %d bit flips rejected, the rest left the content unchanged", len(data), caught, total)
	})
}

// TestWriteRefusesNonFiniteLabels: the writer refuses non-finite labels outright and
// writes nothing.
func TestWriteRefusesNonFiniteLabels(t *testing.T) {
	out := t.TempDir()
	fake := &labeldistill.Result{BaseShape: [4]int64{2, 1, 1, 1}, BaseImages: []float32{0, 1}, Classes: 2, Labels: []float32{0.5, 0.5, float32(math.NaN()), 1}}
	if err := Write(out, fake); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Fatalf("Write with a NaN label: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, DistilledFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an artifact was written: %v", err)
	}
}
