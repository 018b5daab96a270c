package tunnel

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// wait bounds every blocking step of a test; nothing is expected to get near it.
const wait = 20 * time.Second

// tcpPair returns the two ends of a fresh loopback TCP connection.
func tcpPair(t testing.TB) (client, server *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return c.(*net.TCPConn), r.c.(*net.TCPConn)
}

type joinResult struct {
	aToB, bToA int64
	err        error
}

// startJoin builds x <-> a [Join] b <-> y and returns the outer ends, which
// the test drives, and the channel Join's result arrives on.
func startJoin(t *testing.T, idle time.Duration) (x, y *net.TCPConn, done <-chan joinResult) {
	t.Helper()
	x, a := tcpPair(t)
	b, y := tcpPair(t)
	ch := make(chan joinResult, 1)
	go func() {
		var r joinResult
		r.aToB, r.bToA, r.err = Join(a, b, idle)
		ch <- r
	}()
	t.Cleanup(func() {
		x.Close()
		y.Close()
	})
	return x, y, ch
}

func result(t *testing.T, done <-chan joinResult) joinResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(wait):
		t.Fatal("Join did not return")
		return joinResult{}
	}
}

func readAll(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to EOF: %v", err)
	}
	return b
}

func TestHalfClose(t *testing.T) {
	tests := []struct {
		name string
		// first is the side that sends and half-closes first; the other side
		// must see EOF, then still be able to answer.
		firstIsX bool
	}{
		{"client half-closes first", true},
		{"server half-closes first", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y, done := startJoin(t, time.Minute)
			first, second := x, y
			if !tt.firstIsX {
				first, second = y, x
			}
			if _, err := first.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := first.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, second); string(got) != "request" {
				t.Fatalf("second side read %q, want %q", got, "request")
			}
			// The half-closed direction is over; the other one must still work.
			if _, err := second.Write([]byte("response")); err != nil {
				t.Fatal(err)
			}
			if err := second.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, first); string(got) != "response" {
				t.Fatalf("first side read %q, want %q", got, "response")
			}
			r := result(t, done)
			if r.err != nil {
				t.Fatalf("Join error: %v", r.err)
			}
			wantAToB, wantBToA := int64(len("request")), int64(len("response"))
			if !tt.firstIsX {
				wantAToB, wantBToA = wantBToA, wantAToB
			}
			if r.aToB != wantAToB || r.bToA != wantBToA {
				t.Fatalf("counts aToB=%d bToA=%d, want %d and %d", r.aToB, r.bToA, wantAToB, wantBToA)
			}
		})
	}
}

func TestIdle(t *testing.T) {
	tests := []struct {
		name string
		// setup makes the tunnel go idle in some way.
		setup func(t *testing.T, x, y *net.TCPConn)
	}{
		{"no traffic at all", func(t *testing.T, x, y *net.TCPConn) {}},
		{"after some traffic", func(t *testing.T, x, y *net.TCPConn) {
			x.Write([]byte("ping"))
			buf := make([]byte, 4)
			y.SetReadDeadline(time.Now().Add(wait))
			if _, err := io.ReadFull(y, buf); err != nil {
				t.Fatal(err)
			}
		}},
		{"one direction half-closed", func(t *testing.T, x, y *net.TCPConn) {
			x.CloseWrite()
		}},
		{"receiver stops reading", func(t *testing.T, x, y *net.TCPConn) {
			// Fill every buffer between x and y so Join blocks in a write
			// that makes no progress.
			go func() {
				chunk := make([]byte, 1<<20)
				x.SetWriteDeadline(time.Now().Add(wait))
				for range 256 {
					if _, err := x.Write(chunk); err != nil {
						return
					}
				}
			}()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y, done := startJoin(t, 100*time.Millisecond)
			tt.setup(t, x, y)
			r := result(t, done)
			if !errors.Is(r.err, ErrIdle) {
				t.Fatalf("Join error = %v, want ErrIdle", r.err)
			}
			// Both outer ends must see the tunnel end.
			for _, c := range []*net.TCPConn{x, y} {
				c.SetReadDeadline(time.Now().Add(wait))
				if _, err := io.Copy(io.Discard, c); err != nil && !isReset(err) {
					t.Fatalf("outer end not closed: %v", err)
				}
			}
		})
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestIdleKeptAliveByOneDirection: traffic one way keeps a silent reverse
// direction open, since idle means no byte moved either way.
func TestIdleKeptAliveByOneDirection(t *testing.T) {
	const idle = 500 * time.Millisecond
	x, y, done := startJoin(t, idle)
	buf := make([]byte, 1)
	deadline := time.Now().Add(3 * idle)
	for i := 0; time.Now().Before(deadline) && i < 10000; i++ {
		if _, err := x.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		y.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.ReadFull(y, buf); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		time.Sleep(idle / 20)
	}
	// y -> x has been silent for longer than idle and must still work.
	if _, err := y.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	x.SetReadDeadline(time.Now().Add(wait))
	got := make([]byte, 4)
	if _, err := io.ReadFull(x, got); err != nil || string(got) != "late" {
		t.Fatalf("reverse direction after one-way traffic: %q, %v", got, err)
	}
	x.Close()
	y.Close()
	result(t, done)
}

func TestLargeTransfer(t *testing.T) {
	sizes := []int{0, 1, smallBuf - 1, smallBuf, smallBuf + 1, largeBuf + 1, 16 << 20}
	for _, size := range sizes {
		t.Run("", func(t *testing.T) {
			x, y, done := startJoin(t, time.Minute)
			up, down := random(t, size), random(t, size/2+3)
			type got struct {
				sum [32]byte
				n   int
				err error
			}
			fromY, fromX := make(chan got, 1), make(chan got, 1)
			// Both directions at once, each side half-closing when done.
			send := func(c *net.TCPConn, p []byte) {
				c.SetDeadline(time.Now().Add(wait))
				_, err := c.Write(p)
				if err == nil {
					err = c.CloseWrite()
				}
				if err != nil {
					t.Errorf("send: %v", err)
				}
			}
			recv := func(c *net.TCPConn, into chan<- got) {
				h := sha256.New()
				n, err := io.Copy(h, c)
				var g got
				copy(g.sum[:], h.Sum(nil))
				g.n, g.err = int(n), err
				into <- g
			}
			go send(x, up)
			go send(y, down)
			go recv(y, fromY)
			go recv(x, fromX)
			for _, c := range []struct {
				ch   chan got
				want []byte
			}{{fromY, up}, {fromX, down}} {
				var g got
				select {
				case g = <-c.ch:
				case <-time.After(wait):
					t.Fatal("transfer did not finish")
				}
				if g.err != nil {
					t.Fatal(g.err)
				}
				if g.n != len(c.want) || g.sum != sha256.Sum256(c.want) {
					t.Fatalf("received %d bytes with a different digest, want %d intact bytes", g.n, len(c.want))
				}
			}
			r := result(t, done)
			if r.err != nil || r.aToB != int64(len(up)) || r.bToA != int64(len(down)) {
				t.Fatalf("Join = %d, %d, %v; want %d, %d, nil", r.aToB, r.bToA, r.err, len(up), len(down))
			}
		})
	}
}

// TestResetEndsBoth: an abortive close on one side ends the tunnel and closes
// the other side rather than leaving it waiting for the idle timeout.
func TestResetEndsBoth(t *testing.T) {
	x, y, done := startJoin(t, time.Hour)
	y.SetLinger(0)
	y.Close()
	readAll(t, x)
	result(t, done)
}

// TestNonTCP: a conn without CloseWrite (net.Pipe) still tunnels; EOF on it
// ends its direction.
func TestNonTCP(t *testing.T) {
	x, a := net.Pipe()
	b, y := tcpPair(t)
	defer y.Close()
	done := make(chan joinResult, 1)
	go func() {
		var r joinResult
		r.aToB, r.bToA, r.err = Join(a, b, time.Minute)
		done <- r
	}()
	go func() {
		x.Write([]byte("over a pipe"))
		x.Close()
	}()
	if got := readAll(t, y); string(got) != "over a pipe" {
		t.Fatalf("got %q", got)
	}
	y.Close()
	r := result(t, done)
	if r.aToB != int64(len("over a pipe")) {
		t.Fatalf("aToB = %d", r.aToB)
	}
}

func random(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// Benchmarks. BenchmarkJoin sends bulk data one way through Join and,
// interleaved in the same loop, over a direct loopback connection, and
// reports both rates and their ratio. The sub-benchmarks compare buffer sizes
// and a splice-capable io.Copy (which cannot enforce the idle timeout without
// losing data on a write deadline) to justify Join's buffers.

const benchTransfer = 64 << 20

func BenchmarkJoin(b *testing.B) {
	variants := []struct {
		name string
		join func(a, b net.Conn)
	}{
		{"Join", func(a, c net.Conn) { Join(a, c, time.Minute) }},
		{"buf=32KiB", func(a, c net.Conn) { join(a, c, time.Minute, 32<<10) }},
		{"buf=64KiB", func(a, c net.Conn) { join(a, c, time.Minute, 64<<10) }},
		{"buf=128KiB", func(a, c net.Conn) { join(a, c, time.Minute, 128<<10) }},
		{"buf=256KiB", func(a, c net.Conn) { join(a, c, time.Minute, 256<<10) }},
		{"splice-no-idle", spliceJoin},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) { benchThroughput(b, v.join) })
	}
}

func spliceJoin(a, c net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(c, a)
		c.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(a, c)
	a.(*net.TCPConn).CloseWrite()
	<-done
	a.Close()
	c.Close()
}

func benchThroughput(b *testing.B, joinFn func(a, b net.Conn)) {
	sink := newSink(b)
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	go func() {
		for {
			a, err := front.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", sink.addr)
			if err != nil {
				a.Close()
				continue
			}
			go joinFn(a, up)
		}
	}()
	payload := random(b, 1<<20)
	var direct, joined time.Duration
	b.SetBytes(benchTransfer)
	b.ResetTimer()
	for b.Loop() {
		direct += sink.send(b, sink.addr, payload)
		joined += sink.send(b, front.Addr().String(), payload)
	}
	n := float64(b.N) * benchTransfer / 1e6
	b.ReportMetric(n/direct.Seconds(), "direct-MB/s")
	b.ReportMetric(n/joined.Seconds(), "join-MB/s")
	b.ReportMetric(direct.Seconds()/joined.Seconds(), "join/direct")
}

// sink is a loopback server that reads each connection to EOF with a large
// buffer and reports how many bytes arrived.
type sink struct {
	addr string
	got  chan int64
}

func newSink(b *testing.B) *sink {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	s := &sink{addr: l.Addr().String(), got: make(chan int64, 1)}
	go func() {
		buf := make([]byte, 256<<10)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			var n int64
			for {
				m, err := c.Read(buf)
				n += int64(m)
				if err != nil {
					break
				}
			}
			c.Close()
			s.got <- n
		}
	}()
	return s
}

// send writes benchTransfer bytes to addr and returns the time until the
// sink has read them all.
func (s *sink) send(b *testing.B, addr string, payload []byte) time.Duration {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	for sent := 0; sent < benchTransfer; sent += len(payload) {
		if _, err := c.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	n := <-s.got
	d := time.Since(start)
	c.Close()
	if n != benchTransfer {
		b.Fatalf("sink got %d bytes, want %d", n, benchTransfer)
	}
	return d
}

// TestIdleHoldsNoBuffer: a TCP tunnel waiting for bytes holds no copy
// buffer, before any traffic and after small exchanges, and still carries
// small and bulk data both ways afterwards.
func TestIdleHoldsNoBuffer(t *testing.T) {
	x, a := tcpPair(t)
	b, y := tcpPair(t)
	t.Cleanup(func() { x.Close(); y.Close() })
	j := &joiner{a: a, b: b, idle: time.Hour, start: time.Now()}
	done := make(chan joinResult, 1)
	go func() {
		var r joinResult
		r.aToB, r.bToA, r.err = j.run(0)
		done <- r
	}()
	idle := func(when string) {
		t.Helper()
		for i := 0; j.held.Load() != 0; i++ {
			if i == 2000 {
				t.Fatalf("%s: the idle tunnel holds %d buffers", when, j.held.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	idle("before traffic")
	for i := range 3 {
		x.Write([]byte("ping"))
		got := make([]byte, 4)
		y.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.ReadFull(y, got); err != nil || string(got) != "ping" {
			t.Fatalf("round %d: y read %q, %v", i, got, err)
		}
		y.Write([]byte("pong"))
		x.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.ReadFull(x, got); err != nil || string(got) != "pong" {
			t.Fatalf("round %d: x read %q, %v", i, got, err)
		}
		idle("after a small exchange")
	}
	bulk := random(t, 4<<20)
	go func() {
		x.Write(bulk)
		x.CloseWrite()
	}()
	if got := readAll(t, y); !bytes.Equal(got, bulk) {
		t.Fatalf("bulk after idling: got %d bytes, want %d", len(got), len(bulk))
	}
	y.CloseWrite()
	r := result(t, done)
	if r.err != nil || r.aToB != int64(3*4+len(bulk)) || r.bToA != 3*4 {
		t.Fatalf("Join: %+v", r)
	}
	if n := j.held.Load(); n != 0 {
		t.Fatalf("%d buffers still held after Join returned", n)
	}
}
