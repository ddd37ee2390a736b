// sweepjobs.go: `ldtorch sweep --jobs N`: N sweeps of the same grid and folder at once, as
// if the command were started N times (sweeps of one folder share its cells out).

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"
)

// envSweepJob marks a process started by sweep --jobs (its number, from 1): it runs as one
// sweep, ignoring --jobs, and leaves the cells its siblings run without saying so.
const envSweepJob = "LDTORCH_SWEEP_JOB"

// maxSweepJobs bounds --jobs: one process per core is the point; far beyond, they only
// time-slice.
const maxSweepJobs = 256

// maxSweepTogether is the most cells sweep --together steps as one computation.
const maxSweepTogether = 64

// sweepJobs runs this command n times at once (each job ignores --jobs), each in a process
// group of its own so that a terminal's Ctrl-C reaches it once, forwarded by this process;
// a second interruption kills them. Their output lines are prefixed "[job i] "; the
// summary, which each prints, is printed once here.
func (e *env) sweepJobs(c *cli.Context, n int, dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return failuref("--jobs: cannot find this program: %v", err)
	}
	// A child whose creating thread ends is sent its Pdeathsig: keep this goroutine on its
	// thread until every job has ended.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var mu sync.Mutex // one line at a time on stderr
	cmds := make([]*exec.Cmd, n)
	outs := make([]*prefixLines, n)
	for i := range cmds {
		cmd := exec.Command(exe, e.argv[1:]...)
		cmd.Env = append(os.Environ(), envSweepJob+"="+strconv.Itoa(i+1))
		outs[i] = &prefixLines{w: e.stderr, mu: &mu, prefix: fmt.Sprintf("[job %d] ", i+1)}
		cmd.Stdout, cmd.Stderr = io.Discard, outs[i]
		// Interrupted once if this process dies without forwarding the interruption.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
		cmds[i] = cmd
	}
	done := make(chan int, n)
	for i, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, p := range cmds[:i] { // the i jobs started before it
				_ = p.Process.Signal(os.Interrupt)
			}
			for range i {
				<-done
			}
			return failuref("--jobs: starting job %d: %v", i+1, err)
		}
		go func(i int) { cmd.Wait(); done <- i }(i)
	}
	kill, stopWatching := secondInterrupt(c.Context)
	defer stopWatching()
	exited := make([]bool, n)
	signalAll := func(sig os.Signal) {
		for i, cmd := range cmds {
			if !exited[i] {
				_ = cmd.Process.Signal(sig)
			}
		}
	}
	ctxDone := c.Context.Done()
	for left := n; left > 0; {
		select {
		case i := <-done:
			exited[i] = true
			left--
		case <-ctxDone:
			signalAll(os.Interrupt)
			ctxDone = nil
		case <-kill:
			signalAll(syscall.SIGKILL)
			kill = nil
		}
	}
	for _, o := range outs {
		o.flush()
	}
	if kill == nil {
		return &exitError{code: exitInterrupted, msg: "interrupted twice: the jobs were killed (their finished cells are kept; continue with the same command: " + commandLine(e.argv) + ")"}
	}
	if c.Context.Err() != nil {
		return &exitError{code: exitInterrupted, msg: "interrupted; finished cells are kept and the running ones checkpointed; continue with the same command: " + commandLine(e.argv)}
	}
	for i, cmd := range cmds {
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			// The job said why on its stderr (shown above, prefixed).
			msg := ""
			if code < 0 {
				msg = fmt.Sprintf("job %d was killed (%v)", i+1, cmd.ProcessState)
			}
			return &exitError{code: max(code, exitFailure), msg: msg}
		}
	}
	return e.printSweepSummary(dir)
}

// prefixLines writes each whole line written to it to w with a prefix, under mu.
type prefixLines struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	part   []byte // an unfinished last line
}

func (p *prefixLines) Write(b []byte) (int, error) {
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexByte(p.part, '\n')
		if i < 0 {
			break
		}
		p.emit(p.part[:i+1])
		p.part = p.part[i+1:]
	}
	return len(b), nil
}

// flush writes an unfinished last line.
func (p *prefixLines) flush() {
	if len(p.part) > 0 {
		p.emit(append(p.part, '\n'))
		p.part = nil
	}
}

func (p *prefixLines) emit(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, p.prefix)
	p.w.Write(line)
}
