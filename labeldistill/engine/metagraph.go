package engine

// metagraph.go: the meta-step on a GPU as a CUDA graph, with LDTORCH_CUDA_GRAPHS=all only
// (not yet checked on a GPU; fresh models' steps are graphs by default, train/graph.go). A
// LeNet meta-step is about 350 small kernels whose time is the host's work per operator
// (4–5 ms on an H200, docs/BENCHMARKS.md); replayed, it costs the GPU's time for them.
//
// What a recorded step reads and updates stays where it is from step to step: the target
// and base images, the labels and their Adam state, the model's parameters, buffers and
// Adam state (reset in place), RR's W and s, and two index tensors into which each step's
// target and base indices (drawn on the host as always) are copied. The Adams keep their
// step counts on the device (torch.Adam.Capturable). A replay leaves the step's reading
// vector and combined meta-gradients in tensors of the graph, which the loop copies and
// shows to the observers after it. Data-parallel runs, method dd and learnt images stay
// eager.

import (
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// metaGraphWarmup is how many meta-steps run on the graph's side stream before the capture.
const metaGraphWarmup = 2

type metaGraph struct {
	graph   *torch.CUDAGraph // nil after a failed capture: eager from then on
	adams   []*torch.Adam
	ti, bi  *torch.Tensor   // the target and base indices the recorded step reads
	reading *torch.Tensor   // the recorded step's reading vector, rewritten by each replay
	grads   []*torch.Tensor // its combined meta-gradients, likewise
	batch   int64
	taken   int
	replays int64
}

// newMetaGraph returns the run's meta-step graph, or nil where meta-steps are eager (and
// will stay so: the loop asks once).
func (l *Loop) newMetaGraph() *metaGraph {
	if !l.in.dev.IsCUDA() || !torch.CUDAGraphsAll() || train.CUDAGraphsFailed() || l.par.size() != 1 ||
		l.dd != nil || l.in.cfg.LearnsImages() || l.model.adam() == nil {
		return nil
	}
	adams := []*torch.Adam{l.model.adam()}
	if l.model.sOpt != nil {
		adams = append(adams, l.model.sOpt)
	}
	for _, v := range l.learnt {
		for _, o := range v.optimizers() {
			adams = append(adams, o.opt)
		}
	}
	for _, a := range adams {
		if a.Capturable() != nil {
			return nil
		}
	}
	g, err := torch.NewCUDAGraph(l.in.dev)
	if err != nil {
		train.NoteCUDAGraphs(0, 0, err)
		return nil
	}
	return &metaGraph{graph: g, adams: adams}
}

// step is queueStep's meta-step on the target indices ti (this rank's n of total) and base
// indices bi: it returns the step's reading vector, in the caller's scope, and the batch
// size its counts refer to, having shown the meta-gradients to the observers.
func (g *metaGraph) step(l *Loop, ti, bi *torch.Tensor, n, total int) (*torch.Tensor, int64, error) {
	if g.ti == nil {
		var c torch.Chain
		g.ti, g.bi = c.T(ti.Clone()), c.T(bi.Clone())
		torch.Escape(g.ti, g.bi)
		if c.Err() != nil {
			return nil, 0, c.Err()
		}
	} else {
		if err := g.ti.Copy_(ti); err != nil {
			return nil, 0, err
		}
		if err := g.bi.Copy_(bi); err != nil {
			return nil, 0, err
		}
	}
	var v *torch.Tensor
	var grads []*torch.Tensor
	var batch int64
	body := func() (err error) {
		v, grads, batch, err = l.stepOn(g.ti, g.bi, n, total)
		return err
	}
	eager := func(run func(func() error) error) (*torch.Tensor, int64, error) {
		err := run(body)
		if err == nil {
			err = l.seeGradients(grads)
		}
		torch.FreeAll(grads)
		return v, batch, err
	}
	g.taken++
	switch {
	case g.graph == nil:
		return eager(func(f func() error) error { return f() })
	case g.taken <= metaGraphWarmup:
		return eager(g.graph.OnSideStream)
	case g.reading == nil:
		// The capture runs the step's Go code once, none of its kernels: the host's step
		// counts it advanced stand for the replay that follows, or are put back.
		counts := make([]int64, len(g.adams))
		for i, a := range g.adams {
			counts[i] = a.StepCount
		}
		if err := g.graph.Capture(body); err != nil {
			train.NoteCUDAGraphs(0, 0, err)
			torch.FreeAll(grads)
			v.Free()
			g.graph.Close()
			g.graph = nil
			for i, a := range g.adams {
				a.StepCount = counts[i]
			}
			return eager(func(f func() error) error { return f() })
		}
		torch.Escape(v)
		g.reading, g.grads, g.batch = v, grads, batch
		train.NoteCUDAGraphs(1, 0, nil)
	default:
		for _, a := range g.adams {
			a.CountReplays(1)
		}
	}
	if err := g.graph.Replay(); err != nil {
		return nil, 0, err
	}
	g.replays++
	if err := l.seeGradients(g.grads); err != nil {
		return nil, 0, err
	}
	out, err := g.reading.Clone()
	return out, g.batch, err
}

// close frees the graph and what it keeps; a nil metaGraph is fine.
func (g *metaGraph) close() {
	if g == nil {
		return
	}
	train.NoteCUDAGraphs(0, g.replays, nil)
	g.graph.Close()
	torch.FreeAll(g.grads)
	for _, t := range []*torch.Tensor{g.reading, g.ti, g.bi} {
		if t != nil {
			t.Free()
		}
	}
}
