package torch

import (
	"testing"
)

// A census counts the forward operators and the backward engine's nodes of a small graph,
// tells top-level calls from nested ones, and counts nothing after it stops.
func TestOpCensus(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(FromFloat64([]float64{1, 2, 3}, 3))
	ok(t, x.SetRequiresGrad(true))

	ok(t, StartOpCensus())
	wantErr(t, StartOpCensus(), "op_census_start", "already running")
	y := T(x.Mul(x))
	z := T(y.Sum())
	ok(t, z.Backward())
	counts, err := StopOpCensus()
	ok(t, err)
	by := map[string]OpCount{}
	for _, c := range counts {
		by[c.Name] = c
	}
	t.Logf("%d names: %+v", len(counts), counts)

	// The forward product: asked for once by the program; the backward's MulBackward0 calls
	// it again, nested (x·grad twice, or once for a product of a tensor with itself).
	if c := by["aten::mul"]; c.Top != 1 || c.Calls < 2 || c.Leaf < 2 {
		t.Errorf("aten::mul = %+v, want 1 top-level call of at least 2, leaves ≥ 2", c)
	}
	// The engine runs each node inside a call of its own, the top-level one.
	for _, node := range []string{"MulBackward0", "SumBackward0"} {
		if c := by[node]; c.Calls != 1 || c.Top != 0 || c.Leaf != 0 {
			t.Errorf("%s = %+v, want one nested call enclosing others", node, c)
		}
		if c := by["autograd::engine::evaluate_function: "+node]; c.Calls != 1 || c.Top != 1 {
			t.Errorf("the engine's call of %s = %+v, want one top-level call", node, c)
		}
	}
	calls, top, leaf := OpTotals(counts)
	if top < 4 || leaf < 3 || calls < top+leaf-1 || calls > 1000 {
		t.Errorf("totals calls %d, top %d, leaf %d", calls, top, leaf)
	}

	_, err = StopOpCensus()
	wantErr(t, err, "op_census_stop", "no operator census is running")
	T(x.Mul(x))
	ok(t, StartOpCensus())
	counts, err = StopOpCensus()
	ok(t, err)
	if len(counts) != 0 {
		t.Errorf("a census with no calls in it counted %+v", counts)
	}
}
