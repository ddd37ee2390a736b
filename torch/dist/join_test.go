package dist

// Joining is bounded whatever answers on MASTER_PORT: a rank started against a listener that
// is not a c10d store (silent, a byte stream, zeros, an HTTP-like service, one that hangs
// up, one that answers once and then streams) fails within LDTORCH_DIST_TIMEOUT plus a
// margin, in one message naming the address; a rank waiting to join ends on SIGTERM and
// SIGINT. The ranks are child processes (the test binary as a "join" worker), so that a
// crash would show as a signal instead of taking the test down.

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostile is a TCP listener on 127.0.0.1 that serves every connection with serve; it
// counts the connections it accepted.
type hostile struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	conns    []net.Conn
}

func listenHostile(t *testing.T, serve func(net.Conn)) *hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.accepted++
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
	})
	return h
}

func (h *hostile) port() int { return h.ln.Addr().(*net.TCPAddr).Port }

func (h *hostile) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted
}

// stream writes b to c until the peer goes.
func stream(b []byte) func(net.Conn) {
	return func(c net.Conn) {
		for {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}
}

// joinWorker starts the test binary as one rank that only joins (scenario "join").
func joinWorker(t *testing.T, rank, port int, timeout time.Duration) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(withoutDistVars(os.Environ()), workerVar+"=join", "OMP_NUM_THREADS=1",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "WORLD_SIZE=2", "RANK="+strconv.Itoa(rank),
		"LDTORCH_DIST_TIMEOUT="+timeout.String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, &out
}

// waitExit waits for cmd at most limit and returns its exit code (-1 for a signal).
func waitExit(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), time.Since(start)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, time.Since(start)
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the rank is still waiting %v later (killed)\n%s", limit, out)
	}
	return 0, 0
}

// SIGTERM and SIGINT end a rank waiting to join: rank 1 held by a silent listener, rank 0
// waiting for a rank 1 that never comes; each with a timeout of a minute.
func TestJoinEndsOnSignal(t *testing.T) {
	for _, c := range []struct {
		rank int
		sig  syscall.Signal
	}{{1, syscall.SIGTERM}, {0, syscall.SIGINT}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			var port int
			var ready func() bool
			if c.rank == 1 {
				h := listenHostile(t, func(c net.Conn) { io.Copy(io.Discard, c) })
				port, ready = h.port(), func() bool { return h.count() > 0 }
			} else {
				var err error
				if port, err = FreePort(); err != nil {
					t.Fatal(err)
				}
				ready = func() bool { // rank 0's store listens
					conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
					if err == nil {
						conn.Close()
					}
					return err == nil
				}
			}
			cmd, out := joinWorker(t, c.rank, port, time.Minute)
			for start := time.Now(); !ready(); time.Sleep(20 * time.Millisecond) {
				if time.Since(start) > 30*time.Second {
					t.Fatalf("rank %d never started joining\n%s", c.rank, out)
				}
			}
			time.Sleep(300 * time.Millisecond) // well inside the wait
			cmd.Process.Signal(c.sig)
			code, took := waitExit(t, cmd, out, 10*time.Second)
			if msg := out.String(); code != 130 || !strings.Contains(msg, "interrupted while") {
				t.Errorf("rank %d: exit %d %v after %v, want 130 and an interruption:\n%s", c.rank, code, c.sig, took, msg)
			}
			t.Logf("rank %d: exit %d %v after %v: %s", c.rank, code, took.Round(time.Millisecond), c.sig, strings.TrimSpace(out.String()))
		})
	}
}

// A rank started with another WORLD_SIZE than rank 0's is told so at once (it failed inside
// Gloo's rendezvous on "sizeof(impl_) == bytes.size(). 136 vs 68").
func TestWorldSizeMismatchNamed(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	joinWorker(t, 0, port, 5*time.Second) // WORLD_SIZE=2
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(withoutDistVars(os.Environ()), workerVar+"=join", "OMP_NUM_THREADS=1",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "WORLD_SIZE=3", "RANK=1", "LDTORCH_DIST_TIMEOUT=5s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	code, took := waitExit(t, cmd, &out, 20*time.Second)
	if msg := out.String(); code != 5 || !strings.Contains(msg, "this rank has WORLD_SIZE=3, but rank 0") || !strings.Contains(msg, "runs a group of 2") {
		t.Errorf("exit %d after %v, want 5 and the two sizes named:\n%s", code, took, msg)
	}
}

// A GLOO_SOCKET_IFNAME this machine lacks is named at once (Gloo said so only after the
// store's rendezvous, at the timeout).
func TestUnknownInterface(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Init(Config{Addr: "127.0.0.1", Port: port, Rank: 0, WorldSize: 2, Interface: "nosuch0", Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), `GLOO_SOCKET_IFNAME="nosuch0" is not a network interface of this machine (it has: lo`) {
		t.Errorf("got %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}
