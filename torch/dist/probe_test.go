package dist

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The probe's two queries against stand-ins that speak them as libtorch's stores do (the
// join tests meet the real store of the linked libtorch, so only one of the two), and
// against stand-ins that get them slightly wrong.
func TestProbeQueries(t *testing.T) {
	// checkAnswer reads a 1.x CHECK of one key and answers NOT_READY with answer's bytes.
	checkAnswer := func(answer ...byte) func(net.Conn) {
		return func(c net.Conn) {
			head := make([]byte, 1+8+8)
			if _, err := io.ReadFull(c, head); err != nil || head[0] != 4 || binary.LittleEndian.Uint64(head[1:]) != 1 {
				return
			}
			if _, err := io.ReadFull(c, make([]byte, binary.LittleEndian.Uint64(head[9:]))); err != nil {
				return
			}
			c.Write(answer)
			io.Copy(io.Discard, c)
		}
	}
	// pingAnswer reads VALIDATE and PING and answers with reply(nonce), in pieces of piece bytes.
	pingAnswer := func(piece int, reply func(nonce []byte) []byte) func(net.Conn) {
		return func(c net.Conn) {
			q := make([]byte, 10)
			if _, err := io.ReadFull(c, q); err != nil || q[0] != 0 || binary.LittleEndian.Uint32(q[1:]) != 0x3C85F7CE || q[5] != 13 {
				return
			}
			b := reply(q[6:])
			for len(b) > 0 {
				k := min(piece, len(b))
				c.Write(b[:k])
				b = b[k:]
				time.Sleep(5 * time.Millisecond)
			}
			io.Copy(io.Discard, c)
		}
	}
	echo := func(nonce []byte) []byte { return nonce }
	for _, c := range []struct {
		name  string
		query storeQuery
		serve func(net.Conn)
		want  string // "" for a store
	}{
		{"1.x store", askCheck, checkAnswer(1), ""},
		{"1.x: two bytes", askCheck, checkAnswer(1, 1), `it sent "\x01\x01" in answer to a store query`},
		{"1.x: not READY or NOT_READY", askCheck, checkAnswer(7), `it sent "\a" in answer`},
		{"2.x store", askPing, pingAnswer(4, echo), ""},
		{"2.x store, the nonce in pieces", askPing, pingAnswer(1, echo), ""},
		{"2.x: another nonce", askPing, pingAnswer(4, func(n []byte) []byte { return []byte{n[0] ^ 1, n[1], n[2], n[3]} }), "in answer to a store query"},
		{"2.x: half a nonce", askPing, pingAnswer(2, func(n []byte) []byte { return n[:2] }), "and then nothing more"},
		{"2.x: the nonce and more", askPing, pingAnswer(4, func(n []byte) []byte { return append(append([]byte{}, n...), 'x') }), "more after its answer to a store query"},
		{"2.x: silent", askPing, func(c net.Conn) { io.Copy(io.Discard, c) }, "did not answer a store query within the timeout"},
		{"no query: silent", askNothing, func(c net.Conn) { io.Copy(io.Discard, c) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := listenHostile(t, c.serve)
			deadline := time.Now().Add(time.Second)
			err := probeStore(context.Background(), h.ln.Addr().String(), deadline, c.query)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("a store taken for something else: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}
