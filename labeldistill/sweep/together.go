package sweep

// together.go: cells of one shape distilled in one computation (Options.Together,
// labeldistill.DistillTogether), each into its own folder as if it ran alone.

import (
	"context"
	"errors"
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// togetherGroup is the indices of the cells of todo to run together with todo[i]: it and
// the later cells not yet handled of its key (labeldistill.CanDistillTogether) and state
// (new with new, resumed with resumed), up to k of them in todo's order, marked handled.
// Fewer than two (or k ≤ 1): todo[i] runs alone.
func togetherGroup(todo []Cell, i int, states map[string]State, handled map[string]bool, k int) []int {
	if k <= 1 {
		return nil
	}
	key, ok := labeldistill.CanDistillTogether(todo[i].Config)
	if !ok {
		return nil
	}
	st := states[todo[i].ID]
	group := []int{i}
	for j := i + 1; j < len(todo) && len(group) < k; j++ {
		c := todo[j]
		if handled[c.ID] || states[c.ID] != st {
			continue
		}
		if kj, ok := labeldistill.CanDistillTogether(c.Config); ok && kj == key {
			group = append(group, j)
		}
	}
	if len(group) > 1 {
		for _, j := range group {
			handled[todo[j].ID] = true
		}
	}
	return group
}

// runTogether runs the cells todo[group] together, each under its own lock (a cell another
// process holds is left to it, one finished meanwhile is done) from its state, then writes
// each one's artifact. Resumed cells whose checkpoints stand at different meta-steps (a
// sweep killed while it wrote them) run one by one.
func runTogether(ctx context.Context, todo []Cell, group []int, states map[string]State, o Options) (err error) {
	n := len(todo)
	var cells []Cell
	var at []int
	var sts []State
	var releases []func(failed bool)
	defer func() {
		for _, r := range releases {
			r(err != nil)
		}
	}()
	for _, j := range group {
		c := todo[j]
		release, st, err := claimCell(c)
		if err != nil {
			return fmt.Errorf("cell %s: %w", c.ID, err)
		}
		if release == nil { // busy or done
			if o.Cell != nil {
				o.Cell(c, j+1, n, st)
			}
			continue
		}
		cells, at, sts, releases = append(cells, c), append(at, j), append(sts, st), append(releases, release)
	}
	if len(cells) == 0 {
		return nil
	}
	rs := make([]config.Resolved, len(cells))
	opts := make([][]labeldistill.RunOption, len(cells))
	for k, c := range cells {
		if o.Cell != nil {
			o.Cell(c, at[k]+1, n, sts[k])
		}
		rs[k], opts[k] = c.Config, cellRunOptions(c, sts[k], o)
	}
	finished := func(k int, res *labeldistill.Result, err error) error { // cell k's artifacts, then its report
		if err := finishCell(ctx, cells[k], res, err); err != nil {
			return fmt.Errorf("cell %s: %w", cells[k].ID, err)
		}
		if o.Cell != nil {
			o.Cell(cells[k], at[k]+1, n, CellFinished)
		}
		return nil
	}
	results, err := labeldistill.DistillTogether(ctx, rs, opts)
	var se *labeldistill.ShapeError
	if errors.As(err, &se) && se.Field == "position" {
		for k, c := range cells { // one by one, each written as it ends
			res, err := labeldistill.DistillResolved(ctx, c.Config, opts[k]...)
			if err := finished(k, res, err); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		for _, c := range cells {
			_ = finishCell(ctx, c, nil, err) // the checkpoint folders of cells that made none go
		}
		var re *labeldistill.RunError
		if errors.As(err, &re) && re.Index < len(cells) {
			return fmt.Errorf("cell %s (distilled together with %d others): %w", cells[re.Index].ID, len(cells)-1, re.Err)
		}
		return fmt.Errorf("cells %s and %d others (distilled together): %w", cells[0].ID, len(cells)-1, err)
	}
	for k := range cells {
		if err := finished(k, results[k], nil); err != nil {
			return err
		}
	}
	return nil
}
