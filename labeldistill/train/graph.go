package train

// graph.go: fresh models' training steps on a GPU as a CUDA graph. A LeNet step is a few
// hundred small kernels whose time is the host's work per operator (2.8 ms for LD RR's recipe
// on an H200, docs/BENCHMARKS.md); recorded once, each later step is one launch.

import (
	"sync"

	"github.com/ldtorch/ldtorch/torch"
)

// graphWarmup is how many steps run on the graph's side stream before the capture: libtorch
// sets up its per-stream state (cuBLAS workspaces, cuDNN handles) on first use.
const graphWarmup = 2

// graphStatus is what this process's trainings did with CUDA graphs; after a failed capture
// no later training tries again (a half-ended capture may leave the allocator's state for
// that stream behind).
var graphStatus struct {
	sync.Mutex
	captured, replayed int64
	failed             error
}

// CUDAGraphStatus returns how many trainings of this process recorded their step as a CUDA
// graph, how many steps were replays, and the error of the capture that failed (nil if none
// did; the training then went on without a graph, as do all later ones).
func CUDAGraphStatus() (captured, replayed int64, failed error) {
	graphStatus.Lock()
	defer graphStatus.Unlock()
	return graphStatus.captured, graphStatus.replayed, graphStatus.failed
}

// CUDAGraphsFailed reports whether a capture of this process failed: after one, nothing
// records CUDA graphs any more.
func CUDAGraphsFailed() bool {
	graphStatus.Lock()
	defer graphStatus.Unlock()
	return graphStatus.failed != nil
}

// NoteCUDAGraphs adds to CUDAGraphStatus what a caller outside this package recorded and
// replayed (the meta-loop's graph), or the error of its failed capture.
func NoteCUDAGraphs(captured, replayed int64, failed error) {
	graphStatus.Lock()
	defer graphStatus.Unlock()
	graphStatus.captured += captured
	graphStatus.replayed += replayed
	if failed != nil && graphStatus.failed == nil {
		graphStatus.failed = failed
	}
}

// stepGraph takes a training's steps through one CUDA graph: the first graphWarmup steps run
// on the graph's side stream, the next is recorded, and from then on every step, that one
// included, is a replay with its minibatch indices copied into the index tensor the recorded
// step reads. Everything else a step reads or updates stays in place between steps: the
// images and labels, the parameters, the Adam moments and their step counts (on the device:
// torch.Adam.Capturable), RR's W and s.
type stepGraph struct {
	tr       *Trainer
	l        *Models
	graph    *torch.CUDAGraph
	adams    []*torch.Adam
	idx      *torch.Tensor // the indices the recorded step reads
	taken    int
	captured bool
	replays  int64
}

// newStepGraph returns nil where steps are taken eagerly: off a GPU, with
// LDTORCH_CUDA_GRAPHS=off, after a failed capture in this process, for schedules (their step
// sizes change), augmentation (its random draws), optimisers other than Adam, and trainings
// too short to gain.
func (tr *Trainer) newStepGraph(l *Models, steps int) *stepGraph {
	if !tr.Device.IsCUDA() || !torch.CUDAGraphsEnabled() || CUDAGraphsFailed() || tr.Schedule != nil ||
		l.Augment != nil || steps <= graphWarmup+1 {
		return nil
	}
	opt, ok := l.Opt.(*torch.Adam)
	if !ok {
		return nil
	}
	adams := []*torch.Adam{opt}
	if l.SOpt != nil {
		adams = append(adams, l.SOpt)
	}
	for _, a := range adams {
		if a.Capturable() != nil {
			return nil
		}
	}
	graph, err := torch.NewCUDAGraph(tr.Device)
	if err != nil {
		NoteCUDAGraphs(0, 0, err)
		return nil
	}
	return &stepGraph{tr: tr, l: l, graph: graph, adams: adams}
}

// step takes one training step on the minibatch indices idx.
func (g *stepGraph) step(idx *torch.Tensor, batch int64) error {
	if g.idx == nil {
		c, err := idx.Clone()
		if err != nil {
			return err
		}
		torch.Escape(c)
		g.idx = c
	} else if err := g.idx.Copy_(idx); err != nil {
		return err
	}
	l, tr := g.l, g.tr
	run := func() error { return l.Step(tr.Images, tr.Labels, g.idx, batch) }
	g.taken++
	switch {
	case g.graph == nil: // the capture failed: eager from then on
		return run()
	case g.taken <= graphWarmup:
		return g.graph.OnSideStream(run)
	case !g.captured:
		// Capture runs the step's Go code but none of its kernels: the host's counts it
		// advanced stand for the replay that follows, or are put back if it failed.
		steps, counts := l.steps, make([]int64, len(g.adams))
		for i, a := range g.adams {
			counts[i] = a.StepCount
		}
		if err := g.graph.Capture(run); err != nil {
			NoteCUDAGraphs(0, 0, err)
			g.graph.Close()
			g.graph = nil
			l.steps = steps
			for i, a := range g.adams {
				a.StepCount = counts[i]
			}
			return run()
		}
		g.captured = true
		NoteCUDAGraphs(1, 0, nil)
		g.replays++
		return g.graph.Replay()
	}
	if err := g.graph.Replay(); err != nil {
		return err
	}
	l.steps++
	for _, a := range g.adams {
		a.CountReplays(1)
	}
	g.replays++
	return nil
}

// close frees the graph and its index tensor; a nil stepGraph is fine.
func (g *stepGraph) close() {
	if g == nil {
		return
	}
	NoteCUDAGraphs(0, g.replays, nil)
	g.graph.Close()
	if g.idx != nil {
		g.idx.Free()
	}
}
