package torch

// scope_test.go: Scope semantics (nesting, Keep, Escape, idempotent and cascading Close),
// and the memory test: 1000 LeNet second-order meta-steps, one Scope each, with flat RSS.

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"
)

// noOpenScope fails the test if a scope leaked from an earlier test.
func noOpenScope(t *testing.T) {
	t.Helper()
	scopeMu.Lock()
	c := current
	scopeMu.Unlock()
	if c != nil {
		t.Fatal("a scope is still open from an earlier test")
	}
}

func one(t *testing.T) *Tensor {
	t.Helper()
	return tensors(t)(Ones([]int64{2}))
}

func TestScopeFreesOnClose(t *testing.T) {
	noOpenScope(t)
	s := NewScope()
	a, b := one(t), one(t)
	c := tensors(t)(a.Add(b))
	if a.scope != s || c.scope != s {
		t.Fatal("tensors created in a scope are not owned by it")
	}
	b.Free() // an explicit Free inside a scope is fine
	s.Close()
	for i, x := range []*Tensor{a, b, c} {
		if !x.Freed() {
			t.Errorf("tensor %d not freed by Close", i)
		}
	}
	if _, err := c.Float32s(); !errors.Is(err, ErrFreed) {
		t.Errorf("use after Close: %v", err)
	}
	s.Close() // idempotent
	noOpenScope(t)
}

func TestScopeNested(t *testing.T) {
	noOpenScope(t)
	outer := NewScope()
	a := one(t)
	inner := NewScope()
	b := one(t)
	if a.scope != outer || b.scope != inner {
		t.Fatal("ownership: want a in outer, b in inner")
	}
	inner.Close()
	if !b.Freed() || a.Freed() {
		t.Fatalf("after inner Close: a freed %v (want false), b freed %v (want true)", a.Freed(), b.Freed())
	}
	c := one(t) // the outer scope is current again
	if c.scope != outer {
		t.Fatal("a tensor created after the inner Close is not owned by the outer scope")
	}
	outer.Close()
	if !a.Freed() || !c.Freed() {
		t.Fatal("outer Close left tensors alive")
	}
	noOpenScope(t)
}

func TestScopeKeepToParent(t *testing.T) {
	noOpenScope(t)
	outer := NewScope()
	inner := NewScope()
	kept, dropped := one(t), one(t)
	inner.Keep(kept)
	inner.Keep(nil)  // ignored
	inner.Keep(kept) // already moved: ignored
	inner.Close()
	if kept.Freed() || !dropped.Freed() {
		t.Fatalf("Keep: kept freed %v, dropped freed %v", kept.Freed(), dropped.Freed())
	}
	if kept.scope != outer {
		t.Fatal("a kept tensor is not owned by the parent")
	}
	if v := vals(t, kept); len(v) != 2 || v[0] != 1 {
		t.Fatalf("kept tensor reads %v", v)
	}
	// Keep of a tensor the scope does not own is a no-op
	other := NewScope()
	other.Keep(kept)
	other.Close()
	if kept.Freed() || kept.scope != outer {
		t.Fatal("Keep by a scope that does not own the tensor moved it")
	}
	outer.Close()
	if !kept.Freed() {
		t.Fatal("the parent's Close did not free a tensor kept into it")
	}
	noOpenScope(t)
}

func TestScopeKeepAtOutermost(t *testing.T) {
	noOpenScope(t)
	s := NewScope()
	x := one(t)
	s.Keep(x)
	s.Close()
	if x.Freed() || x.scope != nil || !x.gc {
		t.Fatalf("Keep at the outermost scope: freed %v, scope %v, gc backstop %v", x.Freed(), x.scope, x.gc)
	}
	x.Free() // the caller's job now
	if !x.Freed() || x.gc {
		t.Fatal("Free after an outermost Keep")
	}
	noOpenScope(t)
}

func TestScopeEscape(t *testing.T) {
	noOpenScope(t)
	outer := NewScope()
	inner := NewScope()
	p := one(t)
	Escape(p, nil)
	Escape(p) // twice: harmless
	inner.Close()
	outer.Close()
	if p.Freed() || p.scope != nil || !p.gc {
		t.Fatalf("Escape: freed %v, scope %v, gc backstop %v", p.Freed(), p.scope, p.gc)
	}
	p.Free()
	// tensors created outside any scope are owned by the caller
	q := one(t)
	if q.scope != nil || !q.gc {
		t.Fatal("a tensor created outside scopes has an owner")
	}
	q.Free()
	noOpenScope(t)
}

func TestScopeCloseParentClosesChildren(t *testing.T) {
	noOpenScope(t)
	grand := NewScope()
	g := one(t)
	parent := NewScope()
	a := one(t)
	child := NewScope()
	b := one(t)
	grandchild := NewScope()
	c := one(t)
	parent.Close()
	for name, x := range map[string]*Tensor{"parent's": a, "child's": b, "grandchild's": c} {
		if !x.Freed() {
			t.Errorf("the %s tensor survived the parent's Close", name)
		}
	}
	if !child.closed || !grandchild.closed {
		t.Error("open children are not marked closed")
	}
	if g.Freed() {
		t.Error("the grandparent's tensor was freed")
	}
	d := one(t) // current is the grandparent again
	if d.scope != grand {
		t.Error("after closing the parent, new tensors do not go to the grandparent")
	}
	child.Close()      // already closed: a no-op that must not pop the grandparent
	grandchild.Close() // likewise
	e := one(t)
	if e.scope != grand {
		t.Error("closing an already closed child changed the current scope")
	}
	grand.Close()
	if !g.Freed() || !d.Freed() || !e.Freed() {
		t.Error("the grandparent's Close left tensors alive")
	}
	noOpenScope(t)
}

func TestWithScope(t *testing.T) {
	noOpenScope(t)
	var inside *Tensor
	sentinel := errors.New("sentinel")
	err := WithScope(func(s *Scope) error {
		inside = one(t)
		kept := one(t)
		s.Keep(kept) // outermost: to the caller
		t.Cleanup(kept.Free)
		return sentinel
	})
	if err != sentinel || !inside.Freed() {
		t.Fatalf("WithScope: err %v, inside freed %v", err, inside.Freed())
	}
	noOpenScope(t)
}

// Results of Grad, Alias and Grad() of a leaf are scope-owned like any other tensor.
func TestScopeOwnsEveryResult(t *testing.T) {
	noOpenScope(t)
	x := tensors(t)(Ones([]int64{3}, WithRequiresGrad()))
	defer x.Free()
	s := NewScope()
	y := tensors(t)(tensors(t)(x.Square()).Sum())
	g := need[[]*Tensor](t)(Grad([]*Tensor{y}, []*Tensor{x}, GradOpts{RetainGraph: true}))
	ok(t, y.Backward())
	lg := tensors(t)(x.Grad())
	al := tensors(t)(x.Alias())
	s.Close()
	for name, v := range map[string]*Tensor{"grad": g[0], "leaf grad": lg, "alias": al} {
		if !v.Freed() {
			t.Errorf("%s not freed by the scope", name)
		}
	}
	if x.Freed() {
		t.Fatal("the aliased tensor was freed with its alias")
	}
	noOpenScope(t)
}

// rssBytes reads the resident set size from /proc/self/statm.
func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := bytes.Fields(b)
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
