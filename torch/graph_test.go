package torch

// graph_test.go: CUDA graphs. Without a GPU only their refusals run.

import (
	"slices"
	"strings"
	"testing"
)

// SetCUDAGraphs: on by default and with on, 1, true or yes; off with off, 0, false or no;
// all; any case; another value is an error saying what it takes, and leaves the setting.
func TestCUDAGraphsSetting(t *testing.T) {
	if s, err := CUDAGraphsSetting(); s != "on" || err != nil {
		t.Fatalf("default: %q, %v; want on", s, err)
	}
	defer func() { ok(t, SetCUDAGraphs("on")) }()
	for v, want := range map[string]string{"": "on", "on": "on", "1": "on", "Yes": "on", "off": "off", "OFF": "off",
		" 0 ": "off", "false": "off", "No": "off", "all": "all", "ALL": "all", "fast": "", "al": ""} {
		ok(t, SetCUDAGraphs("all")) // a known state before each value
		before, _ := CUDAGraphsSetting()
		err := SetCUDAGraphs(v)
		got, _ := CUDAGraphsSetting()
		bad := want == ""
		if bad {
			want = before
			if err == nil || !strings.Contains(err.Error(), "want on, off or all") || !strings.Contains(err.Error(), `"`+v+`"`) {
				t.Errorf("SetCUDAGraphs(%q): error %v", v, err)
			}
		} else if err != nil {
			t.Errorf("SetCUDAGraphs(%q): %v", v, err)
		}
		if got != want {
			t.Errorf("SetCUDAGraphs(%q): setting %q, want %q", v, got, want)
		}
		if CUDAGraphsEnabled() != (want != "off") || CUDAGraphsAll() != (want == "all") {
			t.Errorf("SetCUDAGraphs(%q): enabled %v, all %v", v, CUDAGraphsEnabled(), CUDAGraphsAll())
		}
		if p, err := ParseCUDAGraphs(v); (err != nil) != bad || (!bad && p != want) {
			t.Errorf("ParseCUDAGraphs(%q) = %q, %v", v, p, err)
		}
	}
}

// A graph is for a CUDA device; where the shim has no CUDA (or the machine no GPU) making
// one fails with an error, and a nil or closed graph refuses work.
func TestCUDAGraphRefusals(t *testing.T) {
	_, err := NewCUDAGraph(CPU)
	wantErr(t, err, "cuda_graph", "not cpu")
	if !CUDAIsAvailable() {
		if _, err := NewCUDAGraph(CUDA(0)); err == nil {
			t.Error("NewCUDAGraph(cuda:0) without CUDA: no error")
		}
	}
	var g *CUDAGraph
	wantErr(t, g.Replay(), "cuda_graph_replay", "closed or nil")
	wantErr(t, g.Capture(func() error { return nil }), "cuda_graph_capture", "closed or nil")
	g.Close()
}

// Captured in-place work runs once per replay and not at capture; the warm-up on the side
// stream is ordered with the work around it; new values copied into a captured input are
// what the next replay reads; a capture whose function reads a value back to the host fails
// with an error, and the device goes on working.
func TestCUDAGraphReplay(t *testing.T) {
	if !CUDAIsAvailable() {
		t.Skip("CUDA not available")
	}
	scoped(t)
	T := tensors(t)
	dev := CUDA(0)
	x := T(f64T(t, []float64{1, 2, 3}, 3).To(dev))
	acc := T(Zeros([]int64{3}, WithDType(Double), OnDevice(dev)))
	g := need[*CUDAGraph](t)(NewCUDAGraph(dev))
	defer g.Close()
	step := func() error {
		s := NewScope()
		defer s.Close()
		tmp, err := x.MulScalar(2) // a temporary of the graph's own pool
		if err != nil {
			return err
		}
		return acc.AddScaled_(tmp, 1)
	}
	ok(t, g.OnSideStream(step)) // acc = 2x
	ok(t, g.Capture(step))      // nothing runs
	if got := vals(t, acc); !slices.Equal(got, []float64{2, 4, 6}) {
		t.Fatalf("after warm-up and capture: %v, want [2 4 6]", got)
	}
	ok(t, g.Replay())
	ok(t, g.Replay())
	if got := vals(t, acc); !slices.Equal(got, []float64{6, 12, 18}) {
		t.Fatalf("after two replays: %v, want [6 12 18]", got)
	}
	ok(t, x.Copy_(T(f64T(t, []float64{10, 0, -1}, 3).To(dev))))
	ok(t, g.Replay())
	if got := vals(t, acc); !slices.Equal(got, []float64{26, 12, 16}) {
		t.Fatalf("after new input and a replay: %v, want [26 12 16]", got)
	}

	bad := need[*CUDAGraph](t)(NewCUDAGraph(dev))
	defer bad.Close()
	ok(t, bad.OnSideStream(step))
	err := bad.Capture(func() error {
		_, err := acc.Float64s()
		return err
	})
	if err == nil {
		t.Fatal("a capture that reads a value back: no error")
	}
	t.Logf("capture reading back: %v", err)
	// libtorch may end such a capture cleanly (the copy refused itself before it was
	// recorded), with part of the function in the graph: it must not be replayed.
	wantErr(t, bad.Replay(), "cuda_graph_replay", "nothing to replay: the capture failed")
	ok(t, step())
	if got := vals(t, acc); !slices.Equal(got, []float64{66, 12, 12}) {
		t.Errorf("eager work after the failed capture: %v, want [66 12 12]", got)
	}
}
