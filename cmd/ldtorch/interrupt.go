package main

// interrupt.go: what an interrupt signal does. The first cancels the command's context (every
// training loop checks it at each step, checkpoints and stops); a second one kills a lone
// process the default way, and makes a launcher (--nproc, sweep --jobs) kill its children.

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interruptSignals stop a run the same way: SIGHUP (a dropped SSH session) like Ctrl-C.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// sameInterruption is how long the first interrupt signal, delivered again, is still the
// first: timeout(1) signals its command and then its own process group, so the command
// gets one SIGTERM twice within microseconds, and killing it on the second would lose the
// checkpoint of the interruption. A person's second Ctrl-C comes later, or is pressed again.
const sameInterruption = time.Second

// interruption tells a second interrupt from the first one delivered again.
type interruption struct {
	first os.Signal
	at    time.Time
}

// second records s and reports whether it is a second interrupt: any signal after the
// first, except the first one again within sameInterruption of it.
func (in *interruption) second(s os.Signal) bool {
	if in.first == nil {
		in.first, in.at = s, time.Now()
		return false
	}
	return s != in.first || time.Since(in.at) >= sameInterruption
}

// earlierSignal stands for a first interrupt that came before a watch began: whatever
// comes next is a second one.
type earlierSignal struct{}

func (earlierSignal) String() string { return "an earlier interrupt" }
func (earlierSignal) Signal()        {}

// watchInterrupts returns parent's child context, cancelled by the first interrupt signal,
// and a function that stops watching. When lone (not a rank of a --nproc group nor a job of
// sweep --jobs, which take every signal as the one interruption and leave killing to their
// launcher), a second interrupt kills the process the default way: the watch stops and the
// signal is raised again, unless another watch (a launcher's secondInterrupt) catches it.
func watchInterrupts(parent context.Context, lone bool) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, interruptSignals...)
	done := make(chan struct{})
	go func() {
		var in interruption
		for {
			select {
			case s := <-sigs:
				if !in.second(s) {
					cancel()
					continue
				}
				if lone {
					signal.Stop(sigs)
					if sig, ok := s.(syscall.Signal); ok {
						_ = syscall.Kill(os.Getpid(), sig)
					}
					return
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel() }
}

// secondInterrupt returns a channel closed when this process receives a second interrupt
// (the first cancels the command's context: the ranks or jobs are told and checkpoint), and
// a function that stops watching. A launcher cannot leave the second signal to kill it the
// default way, as a lone process does: its ranks would go on without it.
func secondInterrupt(ctx context.Context) (<-chan struct{}, func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, interruptSignals...)
	var in interruption
	if ctx.Err() != nil {
		in.first = earlierSignal{} // the first came before this watch began
	}
	kill, done := make(chan struct{}), make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if in.second(s) {
					close(kill)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return kill, func() { signal.Stop(sigs); close(done) }
}
