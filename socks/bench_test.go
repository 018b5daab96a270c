package socks

import (
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
)

// The benchmarks run the direct and the proxied case interleaved in one loop
// and report both, and their ratio, with ReportMetric.

const benchTransfer = 64 << 20

func benchProxy(b *testing.B) *testProxy {
	return startProxy(b, setup{
		cfg:  policy.Config{AllowDomains: []string{"allowed.test"}, AllowLocalhost: true},
		res:  &resolver{names: map[string][]netip.Addr{"allowed.test": {loopback4}}},
		opts: Options{Logf: func(string, ...any) {}},
	})
}

// BenchmarkSOCKSThroughput: bulk data one way, through the proxy by name
// and over a direct loopback connection.
func BenchmarkSOCKSThroughput(b *testing.B) {
	sink, got := benchSink(b, true)
	p := benchProxy(b)
	port := uint16(sink.Addr().(*net.TCPAddr).Port)
	payload := make([]byte, 1<<20)
	rand.Read(payload)

	send := func(c net.Conn) {
		for sent := 0; sent < benchTransfer; sent += len(payload) {
			if _, err := c.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		c.(*net.TCPConn).CloseWrite()
		if n := <-got; n != benchTransfer {
			b.Fatalf("sink got %d bytes, want %d", n, benchTransfer)
		}
		c.Close()
	}
	var direct, proxied time.Duration
	b.SetBytes(benchTransfer)
	for b.Loop() {
		start := time.Now()
		c, err := net.Dial("tcp", sink.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		send(c)
		direct += time.Since(start)

		start = time.Now()
		c = dialProxy(b, p.addr)
		c.SetDeadline(time.Time{})
		if rep := connect(b, c, connectName("allowed.test", port)); rep != 0 {
			b.Fatalf("reply %#x", rep)
		}
		send(c)
		proxied += time.Since(start)
	}
	mb := float64(b.N) * benchTransfer / 1e6
	b.ReportMetric(mb/direct.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/proxied.Seconds(), "socks-MB/s")
	b.ReportMetric(direct.Seconds()/proxied.Seconds(), "socks/direct")
}

// BenchmarkSOCKSConnect: time from dialling until the connection is usable:
// the TCP handshake directly, or the proxy's reply (after its policy
// decision, lookup and upstream dial) through the proxy.
func BenchmarkSOCKSConnect(b *testing.B) {
	sink, _ := benchSink(b, false)
	p := benchProxy(b)
	port := uint16(sink.Addr().(*net.TCPAddr).Port)
	req := append(greeting(), connectName("allowed.test", port)...)
	var direct, proxied time.Duration
	for b.Loop() {
		start := time.Now()
		c, err := net.Dial("tcp", sink.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		direct += time.Since(start)
		c.Close()

		start = time.Now()
		c, err = net.Dial("tcp", p.addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if rep, err := readReply(c); err != nil || rep != 0 {
			b.Fatalf("reply %#x, %v", rep, err)
		}
		proxied += time.Since(start)
		c.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs/conn")
	b.ReportMetric(float64(proxied.Microseconds())/n, "socks-µs/conn")
	b.ReportMetric(proxied.Seconds()/direct.Seconds(), "socks/direct")
}

// benchSink is a loopback server that reads each connection to EOF with a
// large buffer and, if report is set, sends the byte count on got.
func benchSink(b *testing.B, report bool) (net.Listener, <-chan int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan int64)
	stop := make(chan struct{})
	b.Cleanup(func() {
		close(stop)
		l.Close()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				if !report {
					// Pooled buffers: a fresh large one per connection would
					// dominate the connection benchmark.
					io.Copy(io.Discard, c)
					c.Close()
					return
				}
				buf := make([]byte, 256<<10)
				var n int64
				for {
					m, err := c.Read(buf)
					n += int64(m)
					if err != nil {
						break
					}
				}
				c.Close()
				if report {
					select {
					case got <- n:
					case <-stop:
					}
				}
			}()
		}
	}()
	return l, got
}
