//go:build long

package dist

// join_long_test.go: the long tests of join_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestJoinBoundedWhateverListens(t *testing.T) {
	const timeout = 2 * time.Second
	for _, c := range []struct {
		name  string
		serve func(net.Conn)
		want  string
	}{
		{"silent", func(c net.Conn) { io.Copy(io.Discard, c) }, "did not answer a store query within the timeout"},
		{"byte stream", stream(bytes.Repeat([]byte("A"), 1<<16)), `it sent "AAAA`},
		{"zeros", stream(make([]byte, 1<<16)), `it sent "\x00\x00`},
		{"answers a request", func(c net.Conn) {
			c.Read(make([]byte, 512))
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		}, `it sent "HTTP/1.1 400 Bad Request"… in answer to a store query`},
		{"hangs up", func(c net.Conn) { c.Close() }, "closed the connection without being asked anything"},
		{"one good byte, then more", func(c net.Conn) {
			c.Read(make([]byte, 512))
			c.Write([]byte{1})
			time.Sleep(10 * time.Millisecond)
			stream([]byte{0, 1})(c)
		}, "to a store query"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := listenHostile(t, c.serve)
			cmd, out := joinWorker(t, 1, h.port(), timeout)
			// the worker loads libtorch first: allow for that beyond the join's own bound
			code, took := waitExit(t, cmd, out, timeout+JoinMargin+20*time.Second)
			msg := strings.TrimSpace(out.String())
			where := "could not join the group at 127.0.0.1:" + strconv.Itoa(h.port())
			if code != 5 || !strings.Contains(msg, where) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("exit %d after %v, want 5 and one line with %q and %q:\n%s", code, took, where, c.want, msg)
			}
			if c.name != "silent" && !strings.Contains(msg, "not a c10d store") {
				t.Errorf("the message does not say what listens is not a store: %s", msg)
			}
			if h.count() == 0 {
				t.Error("the rank never connected to the listener")
			}
			t.Logf("%v: %s", took.Round(time.Millisecond), msg)
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cmd, out := joinWorker(t, 1, port, timeout)
		code, took := waitExit(t, cmd, out, timeout+JoinMargin+20*time.Second)
		if msg := out.String(); code != 5 || !strings.Contains(msg, "no store listened there within the timeout (connections were refused") {
			t.Errorf("exit %d after %v:\n%s", code, took, msg)
		}
	})
	t.Run("rank 0, port taken", func(t *testing.T) {
		h := listenHostile(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		cmd, out := joinWorker(t, 0, h.port(), timeout)
		code, took := waitExit(t, cmd, out, timeout+JoinMargin+20*time.Second)
		if msg := out.String(); code != 5 || !strings.Contains(msg, "could not join the group at 127.0.0.1:"+strconv.Itoa(h.port())) || !strings.Contains(msg, "is taken on this machine") || strings.Count(msg, "\n") != 1 {
			t.Errorf("exit %d after %v:\n%s", code, took, msg)
		}
		t.Logf("%v: %s", took.Round(time.Millisecond), strings.TrimSpace(out.String()))
	})
}
