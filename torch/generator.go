package torch

// generator.go: seeding, and CPU random generators with savable state (for checkpoints).

/*
#include "shim.h"
*/
import "C"

import "runtime"

// ManualSeed seeds libtorch's default generators (CPU and CUDA), as torch.manual_seed.
func ManualSeed(seed uint64) error { return cerr("manual_seed", C.ldt_manual_seed(C.uint64_t(seed))) }

// Generator is an independent CPU random stream. Random tensors are drawn on the CPU and
// moved to their device, so a seed gives the same numbers everywhere. Close frees it.
type Generator struct {
	g       C.ldt_generator
	cleanup runtime.Cleanup
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) (*Generator, error) {
	var g C.ldt_generator
	if err := cerr("generator", C.ldt_generator_new(&g, C.uint64_t(seed))); err != nil {
		return nil, err
	}
	gen := &Generator{g: g}
	gen.cleanup = runtime.AddCleanup(gen, func(h C.ldt_generator) { C.ldt_generator_free(h) }, g)
	return gen, nil
}

// Close frees the generator; it is idempotent.
func (g *Generator) Close() {
	if g == nil || g.g == nil {
		return
	}
	g.cleanup.Stop()
	C.ldt_generator_free(g.g)
	g.g = nil
}

// handle is NULL for a nil generator (libtorch's default one).
func (g *Generator) handle(op string) (C.ldt_generator, error) {
	if g == nil {
		return nil, nil
	}
	if g.g == nil {
		return nil, errorf(op, "use of a closed generator")
	}
	return g.g, nil
}

// State returns the generator's state as a uint8 tensor (to save in a checkpoint).
func (g *Generator) State() (*Tensor, error) {
	h, err := g.handle("generator_state")
	if err != nil || h == nil {
		if err == nil {
			err = errorf("generator_state", "nil generator")
		}
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_generator_get_state(h, &out)
	return result("generator_state", out, e)
}

// SetState restores a state returned by State.
func (g *Generator) SetState(state *Tensor) error {
	h, err := g.handle("generator_set_state")
	if err != nil || h == nil {
		if err == nil {
			err = errorf("generator_set_state", "nil generator")
		}
		return err
	}
	hs, err := state.handle("generator_set_state")
	if err != nil {
		return err
	}
	return cerr("generator_set_state", C.ldt_generator_set_state(h, hs))
}
