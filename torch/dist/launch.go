package dist

// launch.go: starting N ranks of a program on this machine, as torchrun --standalone does,
// without Python.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// LaunchOptions describes a local launch.
type LaunchOptions struct {
	N      int      // number of ranks
	Path   string   // program (e.g. os.Executable())
	Args   []string // its arguments (without the program name)
	Env    []string // base environment (nil: this process's)
	Stdout io.Writer
	Stderr io.Writer
	// RankStderr, when set, gives the writer for rank r's stderr instead of Stderr (a
	// launcher that shows a failure every rank reports only once holds the others' output).
	RankStderr func(rank int) io.Writer
	// Exited, when set, is told how each rank ended as it ends (err nil for success), from
	// Launch's goroutine.
	Exited func(rank int, err error)
	// Timeout is the ranks' collective timeout (LDTORCH_DIST_TIMEOUT); 0 keeps theirs.
	Timeout time.Duration
	// Kill, when it closes, kills every rank still running with SIGKILL at once (a second
	// Ctrl-C); nil: never.
	Kill <-chan struct{}
}

// RankExit is a rank that ended badly.
type RankExit struct {
	Rank int
	Err  error // from exec: *exec.ExitError for an exit status or a signal
}

func (e *RankExit) Error() string { return fmt.Sprintf("rank %d %s", e.Rank, describeExit(e.Err)) }
func (e *RankExit) Unwrap() error { return e.Err }

func describeExit(err error) string {
	if sig, ok := exitSignal(err); ok {
		return "was killed by signal " + sig.String()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// exitSignal is the signal that killed the process whose end err reports, if one did.
func exitSignal(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}

// killedBySignal reports whether err is a process's death by a signal.
func killedBySignal(err error) bool {
	_, ok := exitSignal(err)
	return ok
}

// causeWindow: a rank killed by a signal this soon after another rank exited with an error
// is named as the cause. The survivors of a killed rank see its end at once (a closed
// connection) and exit with their message within milliseconds, and on a loaded machine
// their exit can be reaped before the killed rank's.
const causeWindow = time.Second

// firstFailure is the failure Launch names: the first rank that failed, or a rank killed by
// a signal within causeWindow after a first that exited with an error.
type firstFailure struct {
	exit *RankExit
	at   time.Time
}

// add records rank's failure err at now and reports whether it is the first failure. A
// killed rank named in place of a survivor is written into the same RankExit, so that an
// error holding it names the killed rank.
func (f *firstFailure) add(rank int, err error, now time.Time) (first bool) {
	switch {
	case f.exit == nil:
		f.exit, f.at = &RankExit{Rank: rank, Err: err}, now
		return true
	case killedBySignal(err) && !killedBySignal(f.exit.Err) && now.Sub(f.at) < causeWindow:
		*f.exit = RankExit{Rank: rank, Err: err}
	}
	return false
}

// errKilled is Launch's error when o.Kill killed the ranks before any failed.
var errKilled = errors.New("the ranks were killed")

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Launch runs N ranks of the program over loopback and waits for all of them. When a rank
// fails, the others normally fail soon after (their collectives name it); any still running
// after their timeout plus a margin are killed, so Launch never hangs on a hung rank. When
// ctx is cancelled every rank gets SIGTERM (and SIGKILL 10 s later, or when o.Kill closes).
// The error names the first rank that failed (firstFailure: a rank killed by a signal ahead
// of the ranks that exited with an error just before it).
func Launch(ctx context.Context, o LaunchOptions) error {
	if o.N < 1 {
		return fmt.Errorf("dist: --nproc must be at least 1, got %d", o.N)
	}
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("dist: no free port on 127.0.0.1: %w", err)
	}
	base := o.Env
	if base == nil {
		base = os.Environ()
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
		if v, ok := lookupIn(base, "LDTORCH_DIST_TIMEOUT"); ok && v != "" {
			if timeout, err = ParseTimeout(v); err != nil {
				return err
			}
		}
	}
	if v, ok := lookupIn(base, "LDTORCH_DIST_SPIN"); ok && v != "" {
		if _, err := ParseSpinWait(v); err != nil { // every rank would refuse it
			return err
		}
	}
	cmds := make([]*exec.Cmd, o.N)
	for r := range cmds {
		c := exec.Command(o.Path, o.Args...)
		c.Env = append(withoutDistVars(base),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"WORLD_SIZE="+strconv.Itoa(o.N), "RANK="+strconv.Itoa(r),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(o.N),
			"LDTORCH_DIST_TIMEOUT="+timeout.String())
		c.Stdout, c.Stderr = o.Stdout, o.Stderr
		if o.RankStderr != nil {
			c.Stderr = o.RankStderr(r)
		}
		cmds[r] = c
	}
	type exit struct {
		rank int
		err  error
	}
	done := make(chan exit, o.N)
	var started sync.WaitGroup
	for r, c := range cmds {
		if err := c.Start(); err != nil {
			for _, p := range cmds[:r] {
				_ = p.Process.Kill()
			}
			for range cmds[:r] {
				<-done
			}
			return fmt.Errorf("dist: starting rank %d: %w", r, err)
		}
		started.Add(1)
		go func(r int, c *exec.Cmd) {
			defer started.Done()
			done <- exit{r, c.Wait()}
		}(r, c)
	}
	exited := make([]bool, o.N)
	signalAll := func(sig os.Signal) {
		for r, c := range cmds {
			if !exited[r] {
				_ = c.Process.Signal(sig)
			}
		}
	}
	var first error
	var failed firstFailure
	var killTimer <-chan time.Time
	ctxDone, kill := ctx.Done(), o.Kill
	for left := o.N; left > 0; {
		select {
		case e := <-done:
			left--
			exited[e.rank] = true
			if o.Exited != nil {
				o.Exited(e.rank, e.err)
			}
			if e.err != nil {
				if failed.add(e.rank, e.err, time.Now()) && first == nil {
					first = failed.exit
					// peers see the failure within their timeout; past it, they are stuck
					killTimer = time.After(timeout + FailureGrace + 3*time.Second)
				}
			}
		case <-killTimer:
			signalAll(syscall.SIGKILL)
			killTimer = nil
		case <-kill:
			signalAll(syscall.SIGKILL)
			kill = nil
			if first == nil {
				first = errKilled
			}
		case <-ctxDone:
			signalAll(syscall.SIGTERM)
			ctxDone = nil
			killTimer = time.After(10 * time.Second)
			if first == nil {
				first = ctx.Err()
			}
		}
	}
	started.Wait()
	if first != nil {
		return fmt.Errorf("dist: %w", first)
	}
	return nil
}

var distVars = map[string]bool{
	"MASTER_ADDR": true, "MASTER_PORT": true, "WORLD_SIZE": true, "RANK": true, "LOCAL_RANK": true,
	"LOCAL_WORLD_SIZE": true, "LDTORCH_DIST_TIMEOUT": true, "TORCHELASTIC_USE_AGENT_STORE": true,
	"TORCHELASTIC_RESTART_COUNT": true,
}

func withoutDistVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if !distVars[k] {
			out = append(out, kv)
		}
	}
	return out
}

func lookupIn(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(key) && env[i][:len(key)] == key && env[i][len(key)] == '=' {
			return env[i][len(key)+1:], true
		}
	}
	return "", false
}
