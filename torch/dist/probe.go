package dist

// probe.go: checking that a c10d store listens on MASTER_ADDR:MASTER_PORT before libtorch's
// TCPStore client connects to it. That client trusts its peer: it waits for answers
// without a time limit, sizes buffers by the lengths it is sent, and (libtorch 1.x) reads a
// second connection on a thread of its own, where a malformed answer throws outside any
// exception barrier and aborts the process. With libtorch 1.13 and no probe, a listener
// that never answers holds a rank past its timeout and past SIGTERM; one that sends a
// stream of bytes kills it with std::bad_alloc, one that sends zeros with
// std::out_of_range. So a rank that is a client of the store first talks to the port itself,
// with its own deadlines and bounded reads.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ldtorch/ldtorch/torch"
)

// unaskedWait is how long a probe listens before asking anything: a c10d store never
// speaks first, while banner services (SSH, SMTP, databases) and byte streams do.
var unaskedWait = 150 * time.Millisecond

// probeError is a listener that is not a c10d store, or no listener within the deadline.
type probeError struct {
	problem string
	err     error
}

func (e *probeError) Error() string {
	if e.err != nil {
		return e.problem + ": " + e.err.Error()
	}
	return e.problem
}

func (e *probeError) Unwrap() error { return e.err }

// legacyStoreProtocol reports whether the linked libtorch's TCPStore speaks the 1.x wire
// protocol (no validation handshake; a query is one type byte, CHECK = 4, then a uint64
// key count and uint64-length-prefixed keys, all little-endian; the answer is one byte,
// READY = 0 or NOT_READY = 1), which the probe can query. Later versions changed the
// numbering and added a handshake; for them the probe only checks that the listener does
// not speak first, and the deadline bounds the rest.
func legacyStoreProtocol() bool {
	info, err := torch.RuntimeInfo()
	if err != nil {
		return false
	}
	major, _, _ := strings.Cut(info.TorchVersion, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n < 2
}

// probeStore connects to addr ("host:port"), retrying while nothing listens yet (the
// store's host may start later), and checks what answers; it returns nil for a c10d
// store, a *probeError otherwise, or ctx's error.
func probeStore(ctx context.Context, addr string, deadline time.Time, query bool) error {
	var lastErr error
	refused := false
	for {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		var d net.Dialer
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			defer conn.Close()
			return checkStore(ctx, conn, deadline, query)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return &probeError{problem: "MASTER_ADDR does not resolve to an address", err: err}
		}
		lastErr = err
		refused = refused || errors.Is(err, syscall.ECONNREFUSED)
		if !time.Now().Before(deadline) {
			problem := "no store listened there within the timeout"
			if refused {
				problem += " (connections were refused: is rank 0 running, with this MASTER_ADDR and MASTER_PORT?)"
			}
			return &probeError{problem: problem, err: lastErr}
		}
		select { // nothing listens yet, or no route yet: try again shortly
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}

// checkStore looks at one connection: nothing unasked, then (query) one well-formed
// answer to a CHECK of a key no one sets, and nothing after it.
func checkStore(ctx context.Context, conn net.Conn, deadline time.Time, query bool) error {
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) }) // a signal ends a read at once
	defer stop()
	buf := make([]byte, 64)
	read := func(until time.Time) (int, error) {
		conn.SetReadDeadline(until)
		n, err := conn.Read(buf)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return n, err
	}
	notStore := func(what string) error {
		return &probeError{problem: "what listens there is not a c10d store: " + what}
	}
	sent := func(n int) string { return "it sent " + quoteStart(buf[:n]) }
	n, err := read(earliest(time.Now().Add(unaskedWait), deadline))
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case n > 0:
		return notStore(sent(n) + " before being asked anything")
	case err != nil && !isTimeout(err):
		return notStore("it closed the connection without being asked anything")
	}
	if !query {
		return nil
	}
	if _, err := conn.Write(checkQuery("ldtorch/probe")); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return notStore("it did not take a store query: " + err.Error())
	}
	n, err = read(deadline)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case n == 0 && isTimeout(err):
		return &probeError{problem: "a listener accepted the connection but did not answer a store query within the timeout (is it a c10d store?)"}
	case n == 0:
		return notStore("it closed the connection when asked a store query")
	case n > 1 || buf[0] > 1:
		return notStore(sent(n) + " in answer to a store query")
	}
	// exactly one byte, READY or NOT_READY: a store says nothing more
	n, err = read(time.Now().Add(unaskedWait / 3))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if n > 0 {
		return notStore("it sent " + quoteStart(buf[:n]) + " more after its answer to a store query")
	}
	_ = err
	return nil
}

// checkQuery encodes a 1.x TCPStore CHECK of one key (TCPStore prefixes keys with "/").
func checkQuery(key string) []byte {
	key = "/" + key
	b := []byte{4}
	b = appendUint64(b, 1)
	b = appendUint64(b, uint64(len(key)))
	return append(b, key...)
}

func appendUint64(b []byte, v uint64) []byte {
	for i := 0; i < 8; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// quoteStart quotes the first bytes a listener sent (enough to recognise a protocol).
func quoteStart(b []byte) string {
	const show = 24
	if len(b) > show {
		return fmt.Sprintf("%q…", b[:show])
	}
	return fmt.Sprintf("%q", b)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
