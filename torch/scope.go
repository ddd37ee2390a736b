package torch

// scope.go: Scope, the deterministic owner of tensors created while it is open.
//
// Scopes form a process-wide stack guarded by a mutex: every tensor created while a scope
// is open belongs to the innermost one, whichever goroutine created it. The rule that keeps
// this correct: one goroutine does all tensor work while scopes are open (data loaders hand
// over Go slices, not tensors). See docs/ARCHITECTURE.md.

import "sync"

// Scope frees every tensor created while it is the innermost open scope when it closes.
//
//	s := torch.NewScope()
//	defer s.Close()
//	... tensors created here are freed by Close, except those passed to s.Keep ...
type Scope struct {
	parent  *Scope
	tensors []*Tensor
	closed  bool
}

var (
	scopeMu sync.Mutex
	current *Scope
)

// NewScope opens a scope nested in the current one.
func NewScope() *Scope {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	s := &Scope{parent: current}
	current = s
	return s
}

// register files t under the innermost open scope, if any.
func register(t *Tensor) bool {
	scopeMu.Lock()
	s := current
	if s != nil {
		t.scope = s
		s.tensors = append(s.tensors, t)
	}
	scopeMu.Unlock()
	return s != nil
}

// Close frees every tensor the scope still owns, closing any scope opened inside it that is
// still open. It is idempotent.
func (s *Scope) Close() {
	scopeMu.Lock()
	if s.closed {
		scopeMu.Unlock()
		return
	}
	onStack := false
	for c := current; c != nil; c = c.parent {
		if c == s {
			onStack = true
			break
		}
	}
	var victims []*Scope
	if onStack {
		for c := current; c != s; c = c.parent {
			victims = append(victims, c)
		}
		current = s.parent
	}
	victims = append(victims, s)
	for _, v := range victims {
		v.closed = true
	}
	scopeMu.Unlock()
	for _, v := range victims {
		for _, t := range v.tensors {
			if t.scope == v {
				t.scope = nil
				t.Free()
			}
		}
		v.tensors = nil
	}
}

// Keep moves tensors owned by s to its parent scope, or, at the outermost scope, out of
// scope ownership altogether (the caller then frees them).
func (s *Scope) Keep(ts ...*Tensor) {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	for _, t := range ts {
		if t == nil || t.scope != s {
			continue
		}
		t.scope = s.parent
		if s.parent != nil {
			s.parent.tensors = append(s.parent.tensors, t)
		} else if t.h != nil {
			t.setCleanup()
		}
	}
}

// Escape removes tensors from whatever scope owns them: the caller frees them with Free
// (a garbage-collector cleanup remains as a backstop). Model parameters and optimizer
// state use this.
func Escape(ts ...*Tensor) {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	for _, t := range ts {
		if t == nil || t.scope == nil {
			continue
		}
		t.scope = nil
		if t.h != nil {
			t.setCleanup()
		}
	}
}

// WithScope runs fn inside a new scope and closes it afterwards, whatever fn returns.
func WithScope(fn func(s *Scope) error) error {
	s := NewScope()
	defer s.Close()
	return fn(s)
}
