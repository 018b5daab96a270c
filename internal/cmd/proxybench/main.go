// Command proxybench measures hermetic's two proxies against a direct
// loopback connection in the same run and prints a table of ratios: bulk
// throughput, connection set-up time (median and p90), and new connections
// per second with concurrent clients. `make bench` runs it.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	xproxy "golang.org/x/net/proxy"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/proxy"
	"github.com/hermetic-dev/hermetic/socks"
)

// staticResolver maps the benchmark's test name to loopback, so the real
// decision path (normalise, decide, resolve, check, dial) runs.
type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.TrimSuffix(host, ".")]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type dialFunc func(target string) (net.Conn, error)

func main() {
	var (
		bulkMB  = flag.Int("bulk-mb", 512, "megabytes per throughput run")
		runs    = flag.Int("runs", 3, "throughput runs per route (the median is reported)")
		setups  = flag.Int("setups", 2000, "sequential connections for set-up time")
		clients = flag.Int("clients", 16, "concurrent clients for the connection rate")
		perCli  = flag.Int("per-client", 250, "connections per concurrent client")
		cpuProf = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	flag.Parse()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "proxybench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*bulkMB, *runs, *setups, *clients, *perCli); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

func run(bulkMB, runs, setups, clients, perClient int) error {
	bulk, err := serve(func(c net.Conn) {
		buf := make([]byte, 256<<10)
		for left := bulkMB << 20; left > 0; left -= len(buf) {
			if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	defer bulk.Close()
	hello, err := serve(func(c net.Conn) { c.Write([]byte{1}) })
	if err != nil {
		return err
	}
	defer hello.Close()

	p, err := policy.New(policy.Config{Allow: []string{"bench.test", "127.0.0.1"}})
	if err != nil {
		return err
	}
	d := &policy.Dialer{Policy: p, Resolver: staticResolver{"bench.test": {netip.MustParseAddr("127.0.0.1")}}}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs, err := proxy.New(proxy.Options{Dialer: d, MaxConns: 4096})
	if err != nil {
		return err
	}
	go hs.Serve(hl)
	defer hs.Close()
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ss, err := socks.New(socks.Options{Dialer: d, MaxConns: 4096})
	if err != nil {
		return err
	}
	go ss.Serve(sl)
	defer ss.Close()

	socksDialer, err := xproxy.SOCKS5("tcp", sl.Addr().String(), nil, &net.Dialer{})
	if err != nil {
		return err
	}
	routes := []struct {
		name string
		dial dialFunc
		host string
	}{
		{"direct", func(t string) (net.Conn, error) { return net.Dial("tcp", t) }, "127.0.0.1"},
		{"http CONNECT", func(t string) (net.Conn, error) { return connectVia(hl.Addr().String(), t) }, "bench.test"},
		{"socks5", func(t string) (net.Conn, error) { return socksDialer.Dial("tcp", t) }, "bench.test"},
	}

	type result struct {
		mbps, p50, p90, rate float64
	}
	results := make([]result, len(routes))
	for i, r := range routes {
		var tps []float64
		for range runs {
			mbps, err := throughput(r.dial, target(r.host, bulk), bulkMB)
			if err != nil {
				return fmt.Errorf("%s throughput: %w", r.name, err)
			}
			tps = append(tps, mbps)
		}
		slices.Sort(tps)
		p50, p90, err := setupTimes(r.dial, target(r.host, hello), setups)
		if err != nil {
			return fmt.Errorf("%s set-up: %w", r.name, err)
		}
		rate, err := connRate(r.dial, target(r.host, hello), clients, perClient)
		if err != nil {
			return fmt.Errorf("%s rate: %w", r.name, err)
		}
		results[i] = result{tps[len(tps)/2], p50, p90, rate}
	}

	base := results[0]
	fmt.Printf("hermetic proxy benchmark: loopback, %d MiB bulk x%d runs (median), %d sequential set-ups, %d clients x %d connections\n\n",
		bulkMB, runs, setups, clients, perClient)
	fmt.Printf("%-14s %12s %8s %14s %14s %10s %14s %8s\n", "route", "throughput", "ratio", "set-up p50", "set-up p90", "added p50", "conns/s", "ratio")
	for i, r := range results {
		fmt.Printf("%-14s %8.0f MB/s %7.2fx %11.0f µs %11.0f µs %7.0f µs %14.0f %7.2fx\n",
			routes[i].name, r.mbps, r.mbps/base.mbps, r.p50, r.p90, r.p50-base.p50, r.rate, r.rate/base.rate)
	}
	return nil
}

func target(host string, l net.Listener) string {
	return net.JoinHostPort(host, fmt.Sprint(l.Addr().(*net.TCPAddr).Port))
}

// serve runs handle for every connection on a loopback listener.
func serve(handle func(net.Conn)) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l, nil
}

// connectVia opens a CONNECT tunnel through an HTTP proxy.
func connectVia(proxyAddr, target string) (net.Conn, error) {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReaderSize(c, 512)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200") {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: %q %v", target, status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	return &bufferedConn{Conn: c, r: br}, nil
}

// bufferedConn reads first what the CONNECT response reader buffered: the
// server may start sending before the client reads the response.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func throughput(dial dialFunc, target string, mb int) (float64, error) {
	c, err := dial(target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	if err != nil {
		return 0, err
	}
	if n != int64(mb)<<20 {
		return 0, fmt.Errorf("read %d bytes, want %d", n, int64(mb)<<20)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// once dials, reads the server's one byte and closes.
func once(dial dialFunc, target string) error {
	c, err := dial(target)
	if err != nil {
		return err
	}
	defer c.Close()
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	return err
}

func setupTimes(dial dialFunc, target string, n int) (p50, p90 float64, err error) {
	times := make([]float64, 0, n)
	for range n {
		start := time.Now()
		if err := once(dial, target); err != nil {
			return 0, 0, err
		}
		times = append(times, float64(time.Since(start).Microseconds()))
	}
	slices.Sort(times)
	return times[n/2], times[n*9/10], nil
}

func connRate(dial dialFunc, target string, clients, per int) (float64, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if err := once(dial, target); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(clients*per) / time.Since(start).Seconds(), nil
}
