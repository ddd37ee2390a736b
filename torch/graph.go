package torch

// graph.go: CUDA graphs. A small model's step on a GPU is bound by the host's work per
// operator; recorded once, a step's few hundred kernels are replayed with one launch.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
)

// CUDAGraphsVariable names the environment variable the ldtorch command reads at start and
// passes to SetCUDAGraphs (the library itself reads no environment).
const CUDAGraphsVariable = "LDTORCH_CUDA_GRAPHS"

// cudaGraphsMode is the setting of SetCUDAGraphs: "on" (the default), "off" or "all".
var cudaGraphsMode atomic.Pointer[string]

// ParseCUDAGraphs reads a setting of where CUDA graphs are used, in any case and with
// spaces around it: "", on, 1, true or yes give "on" (where they have been checked on a
// GPU: fresh models' training steps); off, 0, false or no give "off" (nowhere: the eager
// path, for timing and checking against); all gives "all" (also where they have not been
// checked on a GPU yet: the meta-loop's steps). Any other value is an error saying what it
// takes.
func ParseCUDAGraphs(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "on", "1", "true", "yes":
		return "on", nil
	case "off", "0", "false", "no":
		return "off", nil
	case "all":
		return "all", nil
	}
	return "", fmt.Errorf("torch: CUDA graphs setting %q: want on, off or all", v)
}

// SetCUDAGraphs sets, for the whole process, where callers record steps as CUDA graphs
// (ParseCUDAGraphs' values); a value it refuses leaves the setting as it was. The default is
// "on". Programs call it (the ldtorch command from LDTORCH_CUDA_GRAPHS); the library never
// does.
func SetCUDAGraphs(mode string) error {
	m, err := ParseCUDAGraphs(mode)
	if err != nil {
		return err
	}
	cudaGraphsMode.Store(&m)
	return nil
}

// CUDAGraphsSetting is the setting SetCUDAGraphs made: "on" (the default), "off" or "all".
// The error is always nil (it is there for callers written when the setting came from the
// environment).
func CUDAGraphsSetting() (string, error) {
	if m := cudaGraphsMode.Load(); m != nil {
		return *m, nil
	}
	return "on", nil
}

// CUDAGraphsEnabled reports whether callers should record steps as CUDA graphs: unless
// SetCUDAGraphs said off.
func CUDAGraphsEnabled() bool {
	s, _ := CUDAGraphsSetting()
	return s != "off"
}

// CUDAGraphsAll reports whether SetCUDAGraphs said "all": callers then also record the
// steps whose graphs have not been checked on a GPU yet (the meta-loop's).
func CUDAGraphsAll() bool {
	s, _ := CUDAGraphsSetting()
	return s == "all"
}

// CUDAGraph records the kernels a function launches on a CUDA device, once, and replays
// them. Whatever the recorded function reads or writes must stay where it was during the
// capture: a replay reads the same inputs (copy new values into them) and updates the same
// tensors in place; tensors the function created and freed live on in the graph's own
// memory pool until Close. Capture runs nothing, and nothing in the function may read a
// tensor back to the host.
//
//	g, _ := torch.NewCUDAGraph(dev)
//	defer g.Close()
//	g.OnSideStream(step) // warm-up: runs step, on the stream the capture uses
//	g.Capture(step)      // records step
//	g.Replay()           // runs it, as often as needed
//
// Its methods run on the calling goroutine's OS thread, which they lock while they need it
// (libtorch's current stream is per thread). Without CUDA, NewCUDAGraph fails.
type CUDAGraph struct {
	g       C.ldt_graph
	cleanup runtime.Cleanup
	// failed is the error of a capture whose function failed: libtorch may end such a
	// capture without complaint, with part of the function recorded.
	failed error
}

// NewCUDAGraph returns an empty graph for CUDA device dev, with its own side stream.
func NewCUDAGraph(dev Device) (*CUDAGraph, error) {
	const op = "cuda_graph"
	if !dev.IsCUDA() {
		return nil, errorf(op, "CUDA graphs record CUDA work, not "+dev.String())
	}
	var g C.ldt_graph
	if err := cerr(op, C.ldt_graph_new(&g, C.int(dev.Index))); err != nil {
		return nil, err
	}
	cg := &CUDAGraph{g: g}
	cg.cleanup = runtime.AddCleanup(cg, func(h C.ldt_graph) { C.ldt_graph_free(h) }, g)
	return cg, nil
}

func (g *CUDAGraph) handle(op string) (C.ldt_graph, error) {
	if g == nil || g.g == nil {
		return nil, errorf(op, "use of a closed or nil CUDA graph")
	}
	return g.g, nil
}

// OnSideStream runs fn with the graph's side stream as the current stream, ordered after
// the work queued before it and before the work queued after it: the warm-up steps before
// Capture, which set up on that stream what libtorch sets up lazily.
func (g *CUDAGraph) OnSideStream(fn func() error) error {
	return g.onSide("cuda_graph_side_stream", fn, false)
}

// Capture records the kernels fn launches (running none of them). When fn or the capture
// fails, the error says why, the graph refuses to replay, and the device stays usable.
func (g *CUDAGraph) Capture(fn func() error) error {
	err := g.onSide("cuda_graph_capture", fn, true)
	if err != nil && g != nil {
		g.failed = err
	}
	return err
}

func (g *CUDAGraph) onSide(op string, fn func() error, capture bool) (err error) {
	h, err := g.handle(op)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cerr(op, C.ldt_graph_enter(h)); err != nil {
		return err
	}
	defer func() {
		if e := cerr(op, C.ldt_graph_leave(h)); err == nil {
			err = e
		}
	}()
	if !capture {
		return fn()
	}
	if err := cerr(op, C.ldt_graph_capture_begin(h)); err != nil {
		return err
	}
	ferr := fn()
	// The capture ends whatever fn did: the stream leaves capture mode.
	if e := cerr(op, C.ldt_graph_capture_end(h)); ferr == nil {
		ferr = e
	}
	return ferr
}

// Replay launches the recorded kernels on the current stream.
func (g *CUDAGraph) Replay() error {
	const op = "cuda_graph_replay"
	h, err := g.handle(op)
	if err != nil {
		return err
	}
	if g.failed != nil {
		return errorf(op, "nothing to replay: the capture failed ("+g.failed.Error()+")")
	}
	return cerr(op, C.ldt_graph_replay(h))
}

// Close frees the graph and its memory pool (once the tensors created during its capture are
// freed); it is idempotent.
func (g *CUDAGraph) Close() {
	if g == nil || g.g == nil {
		return
	}
	g.cleanup.Stop()
	C.ldt_graph_free(g.g)
	g.g = nil
}
