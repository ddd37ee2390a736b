package artifact

// torchfile.go: distilled.pt, the artifact's arrays for PyTorch: distilled.npz's members as a
// dict of tensors in libtorch's pickle format (torch.SavePickle), which torch.load reads
// without NumPy. Write writes it beside distilled.npz and records its SHA-256 in the report;
// Read checks it against the report, or, where the report does not name it (an artifact
// from before distilled.pt, given one by Export), against distilled.npz member by member.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// TorchFile is the artifact's arrays in PyTorch's format: torch.load("distilled.pt") gives
// a dict {name: tensor} with distilled.npz's names, dtypes, shapes and values.
const TorchFile = "distilled.pt"

// torchSlack bounds how much larger than distilled.npz a distilled.pt may be (the pickle's
// records and zip headers; the arrays themselves are the same bytes).
const torchSlack = 1 << 20

// encodeTorch returns distilled.pt's bytes for the npz members, in their order.
func encodeTorch(members []*npz.Array) ([]byte, error) {
	return torch.Guard("artifact", func() ([]byte, error) {
		s := torch.NewScope()
		defer s.Close()
		names := make([]string, len(members))
		ts := make([]*torch.Tensor, len(members))
		for i, m := range members {
			t, err := arrayTensor(m)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
			names[i], ts[i] = m.Name, t
		}
		return torch.EncodePickle(names, ts)
	})
}

// arrayTensor copies an npz array of an artifact's dtypes (float32, float64, int64) into a
// CPU tensor.
func arrayTensor(a *npz.Array) (*torch.Tensor, error) {
	shape := make([]int64, len(a.Shape))
	for i, d := range a.Shape {
		shape[i] = int64(d)
	}
	switch v := a.Data.(type) {
	case []float32:
		return torch.FromFloat32(v, shape...)
	case []float64:
		return torch.FromFloat64(v, shape...)
	case []int64:
		return torch.FromInt64(v, shape...)
	}
	return nil, fmt.Errorf("an artifact array of dtype %s has no PyTorch form here", a.DType)
}

// checkTorchFile verifies dir's distilled.pt, when there is one: against the SHA-256 the
// report names (rep may be nil), or else against the npz members it must hold. It reports
// whether the file is there.
func checkTorchFile(dir string, npzSize int, members []*npz.Array, rep *Report) (bool, error) {
	path := filepath.Join(dir, TorchFile)
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		return false, nil // an artifact from before distilled.pt, or one copied without it
	}
	limit := int64(npzSize) + torchSlack
	if rep != nil && rep.Distilled != nil && rep.Distilled.TorchSHA256 != "" {
		// Only a regular file: a named pipe put in its place would make the open wait for a
		// writer, through signals.
		raw, err := boundedread.ReadRegularFile(path, limit, "PyTorch copy of an artifact")
		if err != nil {
			return true, err
		}
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); got != rep.Distilled.TorchSHA256 {
			return true, fmt.Errorf("%s does not belong to %s: its SHA-256 is %s, the report was written for %s; "+
				"the files come from different runs, or the run was stopped between writing them (ldtorch export %s writes it anew)",
				path, filepath.Join(dir, ReportFile), got, rep.Distilled.TorchSHA256, dir)
		}
		return true, nil
	}
	// Not named by a report: it must hold exactly distilled.npz's arrays.
	if st, err := os.Stat(path); err != nil {
		return true, err
	} else if !st.Mode().IsRegular() || st.Size() > limit {
		return true, fmt.Errorf("%s: not a regular file of at most %s (distilled.npz's size and %s): not this artifact's", path,
			boundedread.Size(limit), boundedread.Size(torchSlack))
	}
	_, err := torch.Guard("artifact", func() (struct{}, error) {
		s := torch.NewScope()
		defer s.Close()
		names, ts, err := torch.LoadPickle(path)
		if err != nil {
			return struct{}{}, err
		}
		want := make([]string, len(members))
		for i, m := range members {
			want[i] = m.Name
		}
		if !slices.Equal(names, want) {
			return struct{}{}, fmt.Errorf("%s holds %v, %s holds %v: not this artifact's (ldtorch export %s writes it anew)", path, names, DistilledFile, want, dir)
		}
		for i, m := range members {
			if err := sameArray(m, ts[i]); err != nil {
				return struct{}{}, fmt.Errorf("%s: %s differs from %s's: %v (ldtorch export %s writes it anew)", path, m.Name, DistilledFile, err, dir)
			}
		}
		return struct{}{}, nil
	})
	return true, err
}

// sameArray reports how t differs from a (dtype, shape or values), or nil.
func sameArray(a *npz.Array, t *torch.Tensor) error {
	shape := make([]int64, len(a.Shape))
	for i, d := range a.Shape {
		shape[i] = int64(d)
	}
	if !slices.Equal(t.Shape(), shape) {
		return fmt.Errorf("shape %v, want %v", t.Shape(), shape)
	}
	var same bool
	switch v := a.Data.(type) {
	case []float32:
		got, err := valuesOf(t, torch.Float, (*torch.Tensor).Float32s)
		if err != nil {
			return err
		}
		same = slices.Equal(got, v)
	case []float64:
		got, err := valuesOf(t, torch.Double, (*torch.Tensor).Float64s)
		if err != nil {
			return err
		}
		same = slices.Equal(got, v)
	case []int64:
		got, err := valuesOf(t, torch.Long, (*torch.Tensor).Int64s)
		if err != nil {
			return err
		}
		same = slices.Equal(got, v)
	default:
		return fmt.Errorf("dtype %s", a.DType)
	}
	if !same {
		return fmt.Errorf("other values")
	}
	return nil
}

// valuesOf reads t's values when its dtype is want.
func valuesOf[T any](t *torch.Tensor, want torch.DType, read func(*torch.Tensor) ([]T, error)) ([]T, error) {
	if t.DType() != want {
		return nil, fmt.Errorf("dtype %s, want %s", t.DType(), want)
	}
	return read(t)
}

// Export writes dir's distilled.pt from its distilled.npz (an artifact written before
// distilled.pt existed; Write writes both). dir must be an artifact Read accepts. It returns
// the file's path and whether it was written: an artifact whose report already names its
// distilled.pt, present and verified, is left as it is.
func Export(dir string) (string, bool, error) {
	path := filepath.Join(dir, TorchFile)
	a, err := Read(dir)
	if err != nil {
		return path, false, err
	}
	named := a.Report != nil && a.Report.Distilled != nil && a.Report.Distilled.TorchSHA256 != ""
	if a.HasTorchFile && named {
		return path, false, nil
	}
	pt, err := encodeTorch(a.arrays)
	if err != nil {
		return path, false, fmt.Errorf("%s: %w", path, err)
	}
	if named {
		// The report names a distilled.pt that is missing: write the same file again.
		sum := sha256.Sum256(pt)
		if got := hex.EncodeToString(sum[:]); got != a.Report.Distilled.TorchSHA256 {
			return path, false, fmt.Errorf("%s names a %s of SHA-256 %s, this ldtorch writes one of %s from %s: not writing a file the report would refuse",
				filepath.Join(dir, ReportFile), TorchFile, a.Report.Distilled.TorchSHA256, got, DistilledFile)
		}
	}
	if err := writeFile(path, pt); err != nil {
		return path, false, fmt.Errorf("artifact: %w", err)
	}
	return path, true, nil
}
