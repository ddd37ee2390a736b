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
	"encoding/binary"
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

// storeQuery is what the probe asks a listener that did not speak first, in the wire
// protocol of the linked libtorch's TCPStore (native byte order: little-endian here).
type storeQuery int

const (
	// askNothing: the probe only checks that the listener does not speak first, and the
	// deadline bounds the rest (libtorch 2.0–2.3, whose handshakes the probe does not know).
	askNothing storeQuery = iota
	// askCheck (1.x, no handshake): a CHECK query, type byte 4, then a uint64 key count and
	// uint64-length-prefixed keys; a store answers one byte, READY = 0 or NOT_READY = 1.
	askCheck
	// askPing (2.4 on): the handshake the TCPStore client itself opens with, VALIDATE (type
	// byte 0, then the uint32 magic number 0x3C85F7CE, no answer) and PING (type byte 13,
	// then a uint32 nonce); a store answers the nonce.
	askPing
)

// linkedStoreQuery is the storeQuery for the linked libtorch.
func linkedStoreQuery() storeQuery {
	if torch.CheckABI() != nil {
		return askNothing
	}
	parts := strings.SplitN(torch.Version(), ".", 3)
	major, err1 := strconv.Atoi(parts[0])
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	switch {
	case err1 != nil:
		return askNothing
	case major < 2:
		return askCheck
	case major == 2 && minor < 4:
		return askNothing
	default:
		return askPing
	}
}

// probeStore connects to addr ("host:port"), retrying while nothing listens yet (the
// store's host may start later), and checks what answers; it returns nil for a c10d
// store, a *probeError otherwise, or ctx's error.
func probeStore(ctx context.Context, addr string, deadline time.Time, query storeQuery) error {
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

// checkStore looks at one connection: nothing unasked, then (unless askNothing) one
// well-formed answer to the query, and nothing after it.
func checkStore(ctx context.Context, conn net.Conn, deadline time.Time, query storeQuery) error {
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
	sent := func(b []byte) string { return "it sent " + quoteStart(b) }
	n, err := read(earliest(time.Now().Add(unaskedWait), deadline))
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case n > 0:
		return notStore(sent(buf[:n]) + " before being asked anything")
	case err != nil && !isTimeout(err):
		return notStore("it closed the connection without being asked anything")
	}
	var ask []byte
	var size int                       // the answer's length
	var answered func(got []byte) bool // whether the size bytes got are the right answer
	switch query {
	case askNothing:
		return nil
	case askCheck:
		ask, size = checkQuery("ldtorch/probe"), 1
		answered = func(got []byte) bool { return got[0] <= 1 }
	case askPing:
		nonce := uint32(time.Now().UnixNano()) | 1
		ask, size = pingQuery(nonce), 4
		answered = func(got []byte) bool { return binary.LittleEndian.Uint32(got) == nonce }
	}
	if _, err := conn.Write(ask); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return notStore("it did not take a store query: " + err.Error())
	}
	// The answer may come in pieces: read until it is whole, longer, or the deadline.
	var got []byte
	for len(got) < size {
		n, err = read(deadline)
		got = append(got, buf[:n]...)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case n > 0:
			continue
		case len(got) == 0 && isTimeout(err):
			return &probeError{problem: "a listener accepted the connection but did not answer a store query within the timeout (is it a c10d store?)"}
		case len(got) == 0:
			return notStore("it closed the connection when asked a store query")
		default:
			return notStore(sent(got) + " in answer to a store query, and then nothing more")
		}
	}
	if len(got) > size || !answered(got) {
		return notStore(sent(got) + " in answer to a store query")
	}
	// the whole answer: a store says nothing more
	n, err = read(time.Now().Add(unaskedWait / 3))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if n > 0 {
		return notStore(sent(buf[:n]) + " more after its answer to a store query")
	}
	_ = err
	return nil
}

// pingQuery encodes the 2.x TCPStore client's handshake: VALIDATE with the magic number,
// then PING with nonce.
func pingQuery(nonce uint32) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{0}, 0x3C85F7CE)
	b = append(b, 13)
	return binary.LittleEndian.AppendUint32(b, nonce)
}

// checkQuery encodes a 1.x TCPStore CHECK of one key (TCPStore prefixes keys with "/").
func checkQuery(key string) []byte {
	key = "/" + key
	b := []byte{4}
	b = binary.LittleEndian.AppendUint64(b, 1)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
	return append(b, key...)
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
