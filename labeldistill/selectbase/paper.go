package selectbase

// paper.go: the paper strategy: K random balanced sets, each trained M times with true
// labels and validated every 50 steps; the best mean validation accuracy wins. Finished
// candidates are kept one file each in the progress folder; with a group, rank 0 says which
// are finished, every rank trains a contiguous part of the others, and one all-reduce
// gathers the scores.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// ProgressError is a progress folder that belongs to another selection.
type ProgressError struct{ Dir, Msg string }

func (e *ProgressError) Error() string { return e.Dir + ": " + e.Msg }

// validationSteps is the paper strategy's grid: every ValidateEvery steps up to max, and
// max itself.
func validationSteps(max int) []int {
	var g []int
	for s := ValidateEvery; s <= max; s += ValidateEvery {
		g = append(g, s)
	}
	if len(g) == 0 || g[len(g)-1] != max {
		g = append(g, max)
	}
	return g
}

// candidateSeed is the base seed of candidate k's draw: the base seed itself for the first
// (the set `distill` draws), a derived one for the others.
func candidateSeed(base uint64, k int) uint64 {
	if k == 0 {
		return base
	}
	return train.Seed(base, "select-base-candidate", k)
}

// progressFile is one finished candidate in the progress folder.
type progressFile struct {
	Fingerprint string `json:"fingerprint"`
	Candidate
}

func progressName(k int) string { return fmt.Sprintf("candidate-%05d.json", k) }

// loadProgress reads the finished candidates of the progress folder. A file of another
// selection is a *ProgressError; an unreadable one is reported and trained again.
func (s *selector) loadProgress(cands []Candidate, grid []int) (map[int]bool, error) {
	done := map[int]bool{}
	dir := s.o.ProgressDir
	if dir == "" {
		return done, nil
	}
	for k := range cands {
		path := filepath.Join(dir, progressName(k))
		b, err := boundedread.ReadFile(path, config.MaxFileBytes, "select-base progress file")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var f progressFile
		if err := json.Unmarshal(b, &f); err != nil || f.Index != k {
			s.note(Progress{Phase: "candidate", Message: fmt.Sprintf("warning: %s is not a finished candidate; training it again", path)})
			continue
		}
		if f.Fingerprint != s.sel.Fingerprint || !slices.Equal(f.Indices, cands[k].Indices) {
			return nil, &ProgressError{Dir: dir, Msg: fmt.Sprintf("%s belongs to another selection (other settings, data or seed); remove the folder or choose another output", progressName(k))}
		}
		ok := len(f.Accuracies) == s.o.Repeats
		for _, a := range f.Accuracies {
			ok = ok && len(a) == len(grid)
		}
		if !ok {
			s.note(Progress{Phase: "candidate", Message: fmt.Sprintf("warning: %s has another shape of scores; training it again", path)})
			continue
		}
		if v, bad := badAccuracy(f.Accuracies); bad {
			// An edited or damaged file would otherwise take part in the choice (an accuracy
			// of 1e308 % always wins).
			s.note(Progress{Phase: "candidate", Message: fmt.Sprintf("warning: %s has an accuracy of %g %%, outside 0 to 100; training it again", path, v)})
			continue
		}
		cands[k].Accuracies = f.Accuracies
		done[k] = true
	}
	return done, nil
}

// badAccuracy returns the first accuracy (%) outside 0 … 100.
func badAccuracy(accs [][]float64) (float64, bool) {
	for _, a := range accs {
		for _, v := range a {
			if !(v >= 0 && v <= 100) {
				return v, true
			}
		}
	}
	return 0, false
}

// paper runs the paper strategy.
func (s *selector) paper(ctx context.Context) error {
	K, R := s.o.Candidates, s.o.Repeats
	grid := validationSteps(s.cfg.BaselineMaxSteps)
	ts := &s.ds.TargetSet
	cands := make([]Candidate, K)
	rows := make([][]int, K)
	for k := range cands {
		seed := candidateSeed(s.seed, k)
		b, err := data.SelectBase(ts, data.Balanced, s.cfg.BaseExamples, seed)
		if err != nil {
			return err
		}
		cands[k] = Candidate{Index: k, Seed: seed}
		rows[k] = b.Indices
		for _, r := range b.Indices {
			cands[k].Indices = append(cands[k].Indices, int64(ts.Index[r]))
		}
	}
	g := s.o.Group
	rank, size := 0, 1
	if g != nil {
		rank, size = g.Rank(), g.Size()
	}
	// Rank 0 says which candidates are finished; every rank takes its part of the others.
	doneMask := make([]float64, K)
	if rank == 0 {
		done, err := s.loadProgress(cands, grid)
		if err != nil {
			return err
		}
		for k := range done {
			doneMask[k] = 1
		}
	}
	if size > 1 {
		if err := g.BroadcastFloat64s(0, doneMask); err != nil {
			return err
		}
	}
	var todo []int
	for k, d := range doneMask {
		if d == 0 {
			todo = append(todo, k)
		}
	}
	q, r := len(todo)/size, len(todo)%size
	lo := rank*q + min(rank, r)
	hi := lo + q
	if rank < r {
		hi++
	}
	if s.o.ProgressDir != "" && hi > lo {
		if err := atomicfile.EnsureWritableDir(s.o.ProgressDir); err != nil {
			return err
		}
	}
	if finished := K - len(todo); finished > 0 {
		s.note(Progress{Phase: "candidate", Done: finished, Total: K, Message: fmt.Sprintf("%d of %d candidates finished earlier", finished, K)})
	}
	err := torch.WithScope(func(_ *torch.Scope) error {
		vx, vy, err := engine.SplitTensors(&s.ds.Validation, s.ds.Shape, s.dev)
		if err != nil {
			return err
		}
		for i, k := range todo[lo:hi] {
			accs, err := s.trainCandidate(ctx, k, rows[k], grid, vx, vy)
			if err != nil {
				return fmt.Errorf("candidate %d: %w", k, err)
			}
			cands[k].Accuracies = accs
			if s.o.ProgressDir != "" {
				b, err := json.Marshal(progressFile{Fingerprint: s.sel.Fingerprint, Candidate: cands[k]})
				if err != nil {
					return err
				}
				if err := atomicfile.WriteFile(filepath.Join(s.o.ProgressDir, progressName(k)), b); err != nil {
					return err
				}
			}
			score(&cands[k], grid)
			s.note(Progress{Phase: "candidate", Done: i + 1, Total: hi - lo,
				Message: fmt.Sprintf("candidate %d: best mean validation accuracy %.2f%% after %d steps", k, cands[k].Best, cands[k].BestStep)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if size > 1 {
		// One all-reduce: every rank holds its own candidates' accuracies (rank 0 also the
		// ones finished earlier), zeros elsewhere.
		flat := make([]float64, K*R*len(grid))
		for k := range cands {
			for rr, a := range cands[k].Accuracies {
				copy(flat[(k*R+rr)*len(grid):], a)
			}
		}
		if err := g.SumFloat64s(flat); err != nil {
			return err
		}
		for k := range cands {
			cands[k].Accuracies = make([][]float64, R)
			for rr := range R {
				cands[k].Accuracies[rr] = slices.Clone(flat[(k*R+rr)*len(grid) : (k*R+rr+1)*len(grid)])
			}
		}
	}
	best := -1
	for k := range cands {
		score(&cands[k], grid)
		if best < 0 || cands[k].Best > cands[best].Best {
			best = k
		}
	}
	s.sel.Paper = &PaperResult{Steps: grid, Candidates: cands, Chosen: best, Accuracy: cands[best].Best}
	s.take(rows[best], nil)
	return nil
}

// score fills a candidate's mean over repeats per step and its best (the earliest step on
// ties). A non-finite accuracy (a diverged model's) makes its step's mean NaN, which never
// wins.
func score(c *Candidate, grid []int) {
	c.Mean = make([]float64, len(grid))
	c.Best, c.BestStep = -1, 0
	for si := range grid {
		var sum float64
		for _, a := range c.Accuracies {
			sum += a[si]
		}
		c.Mean[si] = sum / float64(len(c.Accuracies))
		if finite(c.Mean[si]) && c.Mean[si] > c.Best {
			c.Best, c.BestStep = c.Mean[si], grid[si]
		}
	}
}

// trainCandidate trains the repeats of candidate k on its examples with true labels and
// returns their validation accuracies at the grid's steps ([repeat][step]). The repeats
// train together (train.Trainer.TrainModels; on the CPU each model's arithmetic is exactly
// a lone model's), repeat r from seed Seed(base seed, "select-base-paper-k", r).
func (s *selector) trainCandidate(ctx context.Context, k int, rows []int, grid []int, vx, vy *torch.Tensor) ([][]float64, error) {
	sc := torch.NewScope()
	defer sc.Close()
	ts := &s.ds.TargetSet
	chw := ts.ImageSize()
	sp := data.Split{Role: data.SplitTarget, Images: make([]float32, len(rows)*chw), Labels: make([]int64, len(rows)),
		N: len(rows), C: ts.C, H: ts.H, W: ts.W, Classes: ts.Classes}
	for i, r := range rows {
		copy(sp.Images[i*chw:], ts.Image(r))
		sp.Labels[i] = ts.Labels[r]
	}
	x, table, err := s.upload(&sp, true)
	if err != nil {
		return nil, err
	}
	seeds := make([]uint64, s.o.Repeats)
	for r := range seeds {
		seeds[r] = train.Seed(s.seed, fmt.Sprintf("select-base-paper-%d", k), r)
	}
	accs := make([][]float64, s.o.Repeats)
	for r := range accs {
		accs[r] = make([]float64, 0, len(grid))
	}
	tr := &train.Trainer{Net: s.net, Cfg: s.cfg, Images: x, Labels: table, Batch: s.cfg.EvalBatch, Opt: train.AdamSpec(s.cfg.EvalLR), Device: s.dev}
	probe := &train.Probe{At: grid, Fn: func(step int, m *train.Models) error {
		a, err := m.Accuracies(ctx, vx, vy)
		if err != nil {
			return err
		}
		for r := range accs {
			accs[r] = append(accs[r], a[r])
		}
		return nil
	}}
	m, err := tr.TrainModels(ctx, grid[len(grid)-1], seeds, train.Mode(s.dev), probe)
	if err != nil {
		return nil, err
	}
	m.Close()
	return accs, nil
}
