package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

const connectOK = "HTTP/1.1 200 Connection established\r\n\r\n"

// dialVia opens a connection to the upstream on port, directly (proxy ==
// "") or through a CONNECT to allowed.test.
func dialVia(proxy string, port int) (net.Conn, error) {
	if proxy == "" {
		return net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", port, port)
	// The proxy sends nothing after its reply until the upstream does, so
	// reading exactly the reply leaves the tunnel's bytes unread.
	buf := make([]byte, len(connectOK))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != connectOK {
		c.Close()
		return nil, fmt.Errorf("CONNECT: %q %v", buf, err)
	}
	return c, nil
}

// sinkServer reads everything with a large buffer, then reports how many
// bytes it read.
func sinkServer(b *testing.B) *countingListener {
	return tcpServer(b, "tcp", "127.0.0.1:0", func(c net.Conn) {
		c.SetDeadline(time.Time{})
		buf := make([]byte, 256<<10)
		var n uint64
		for {
			m, err := c.Read(buf)
			n += uint64(m)
			if err != nil {
				break
			}
		}
		binary.Write(c, binary.BigEndian, n)
	})
}

func benchProxy(b *testing.B) *env {
	return startProxy(b, testPolicy(), Options{Logf: func(string, ...any) {}})
}

// BenchmarkHTTPConnectThroughput: bulk upload through a CONNECT tunnel and
// over a direct loopback connection, in the same run.
func BenchmarkHTTPConnectThroughput(b *testing.B) {
	e := benchProxy(b)
	sink := sinkServer(b)
	chunk := make([]byte, 256<<10)
	for _, via := range []struct{ name, proxy string }{{"direct", ""}, {"proxy", e.addr}} {
		b.Run(via.name, func(b *testing.B) {
			c, err := dialVia(via.proxy, sink.port())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(int64(len(chunk)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(chunk); err != nil {
					b.Fatal(err)
				}
			}
			c.(*net.TCPConn).CloseWrite()
			var n uint64
			if err := binary.Read(c, binary.BigEndian, &n); err != nil || n != uint64(b.N*len(chunk)) {
				b.Fatalf("sink read %d bytes, %v; want %d", n, err, b.N*len(chunk))
			}
			b.StopTimer()
		})
	}
}

// BenchmarkHTTPConnectSetup: time to a first echoed byte on a new
// connection, through the proxy (CONNECT included) and direct.
func BenchmarkHTTPConnectSetup(b *testing.B) {
	e := benchProxy(b)
	echo := echoServer(b)
	for _, via := range []struct{ name, proxy string }{{"direct", ""}, {"proxy", e.addr}} {
		b.Run(via.name, func(b *testing.B) {
			one := make([]byte, 1)
			for range b.N {
				if err := roundTrip(via.proxy, echo.port(), one); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/conn")
		})
	}
}

// BenchmarkHTTPConnectConnsPerSec: new tunnels per second with 16
// concurrent clients, each opening a tunnel, echoing a byte and closing.
func BenchmarkHTTPConnectConnsPerSec(b *testing.B) {
	e := benchProxy(b)
	echo := echoServer(b)
	for _, via := range []struct{ name, proxy string }{{"direct", ""}, {"proxy", e.addr}} {
		b.Run(via.name, func(b *testing.B) {
			var failed atomic.Value
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				one := make([]byte, 1)
				for pb.Next() {
					if err := roundTrip(via.proxy, echo.port(), one); err != nil {
						failed.Store(err)
						return
					}
				}
			})
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

func roundTrip(proxy string, port int, one []byte) error {
	c, err := dialVia(proxy, port)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(one); err != nil {
		return err
	}
	_, err = io.ReadFull(c, one)
	return err
}
