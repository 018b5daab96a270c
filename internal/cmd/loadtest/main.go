// Command loadtest opens thousands of concurrent tunnels through each of
// hermetic's proxies to a local echo server, holds them, checks that each
// still carries bytes, closes them, and checks that goroutines and
// descriptors come back to where they started. It reports the set-up rate,
// set-up latency percentiles, peak memory and memory per idle tunnel.
// `make load` runs it; everything is on loopback, and every wait is bounded.
//
// Both proxies run in this process, as they do in hermetic, with per-run
// credentials required, behind the real guarded dialer (a static resolver
// maps the test name to 127.0.0.1). Memory per tunnel is the growth of the
// Go runtime's in-use memory while the tunnels are open, less the growth
// for the same number of direct client/echo connections measured first, so
// that the test's own clients and echo server are not charged to the proxy.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/proxy"
	"github.com/hermetic-dev/hermetic/socks"
)

const echoName = "echo.test"

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 2000, "concurrent tunnels per proxy")
	flag.IntVar(&cfg.c, "c", 64, "connections being set up at once")
	flag.DurationVar(&cfg.hold, "hold", 60*time.Second, "how long all tunnels stay open")
	flag.DurationVar(&cfg.settle, "settle", 30*time.Second, "bound on the wait for goroutines and descriptors to return after close")
	flag.Parse()
	if cfg.n < 1 || cfg.c < 1 || cfg.hold < 0 || cfg.settle <= 0 {
		fmt.Fprintln(os.Stderr, "loadtest: -n and -c must be positive, -hold not negative, -settle positive")
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("loadtest: PASS")
}

type config struct {
	n, c         int
	hold, settle time.Duration
}

// opener sets up one tunnel on c to the echo server and returns when the
// proxy has answered success.
type opener func(c net.Conn, echoPort int) error

func run(cfg config) error {
	soft, hard, err := raiseNoFile()
	if err != nil {
		return err
	}
	// Per tunnel: client, proxy's client side, proxy's upstream, echo: four
	// descriptors, and both proxies' tunnels are open together.
	need := uint64(8*cfg.n + 256)
	fmt.Printf("descriptor limit: soft raised to %d (hard %d); this run needs about %d\n", soft, hard, need)
	if need > soft {
		return fmt.Errorf("-n %d needs about %d descriptors, the limit is %d: lower -n or raise the hard limit (ulimit -Hn)", cfg.n, need, soft)
	}

	echo, err := startEcho()
	if err != nil {
		return err
	}
	defer echo.close()

	creds, err := proxy.NewCredentials()
	if err != nil {
		return err
	}
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	socksL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pol, err := policy.New(policy.Config{
		AllowDomains: []string{echoName},
		// The echo server is on loopback: step 5 needs an address rule.
		AllowCIDRs: []string{"127.0.0.1/32"},
		Self:       []netip.AddrPort{addrPort(httpL), addrPort(socksL)},
	})
	if err != nil {
		return err
	}
	dialer := &policy.Dialer{Policy: pol, Resolver: staticResolver{}}
	limit := cfg.n + 64
	hp, err := proxy.New(proxy.Options{Dialer: dialer, MaxConns: limit, Credentials: creds})
	if err != nil {
		return err
	}
	sp, err := socks.New(socks.Options{Dialer: dialer, MaxConns: limit, Credentials: creds})
	if err != nil {
		return err
	}
	served := make(chan error, 2)
	go func() { served <- hp.Serve(httpL) }()
	go func() { served <- sp.Serve(socksL) }()
	closeProxies := func() error {
		err := errors.Join(hp.Close(), sp.Close())
		for range 2 {
			err = errors.Join(err, <-served)
		}
		return err
	}

	base := snapshot()
	fmt.Printf("baseline: %d goroutines, %d descriptors\n\n", base.goroutines, base.fds)

	// Direct connections first: what the clients and the echo server cost
	// on their own, to subtract from the proxied figures.
	direct, err := openAll(cfg, "direct", func() (net.Conn, error) {
		c, err := net.Dial("tcp", echo.addr)
		return c, err
	}, nil, echo.port)
	if err != nil {
		closeProxies()
		return err
	}
	directCost := direct.mem
	closeAll(direct.conns)
	if err := settle(base, cfg.settle); err != nil {
		closeProxies()
		return fmt.Errorf("after the direct connections: %w", err)
	}

	auth := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(creds.User+":"+creds.Password)) + "\r\n"
	httpOpen := func(c net.Conn, port int) error {
		fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", echoName, port, echoName, port, auth)
		br := bufio.NewReaderSize(c, 256)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CONNECT: %s", resp.Status)
		}
		if br.Buffered() > 0 {
			return errors.New("bytes after the CONNECT response")
		}
		return nil
	}
	socksOpen := func(c net.Conn, port int) error {
		req := []byte{5, 1, 2, 1, byte(len(creds.User))}
		req = append(req, creds.User...)
		req = append(req, byte(len(creds.Password)))
		req = append(req, creds.Password...)
		req = append(req, 5, 1, 0, 3, byte(len(echoName)))
		req = append(req, echoName...)
		req = append(req, byte(port>>8), byte(port))
		if _, err := c.Write(req); err != nil {
			return err
		}
		// Method selection, auth status, then a reply with an IPv4 BND.ADDR.
		resp := make([]byte, 2+2+10)
		if _, err := io.ReadFull(c, resp); err != nil {
			return err
		}
		if resp[1] != 2 || resp[3] != 0 || resp[5] != 0 || resp[7] != 1 {
			return fmt.Errorf("SOCKS5 answer % x", resp)
		}
		return nil
	}
	dialTo := func(addr string) func() (net.Conn, error) {
		return func() (net.Conn, error) { return net.Dial("tcp", addr) }
	}

	var runs []*phase
	defer func() {
		for _, p := range runs {
			closeAll(p.conns)
		}
	}()
	for _, p := range []struct {
		name string
		addr string
		open opener
	}{{"http CONNECT", httpL.Addr().String(), httpOpen}, {"socks5", socksL.Addr().String(), socksOpen}} {
		ph, err := openAll(cfg, p.name, dialTo(p.addr), p.open, echo.port)
		if ph != nil {
			runs = append(runs, ph)
		}
		if err != nil {
			closeAll(ph.conns)
			closeProxies()
			return err
		}
	}

	fmt.Printf("\nholding %d tunnels (%d per proxy) for %v ...\n", len(runs)*cfg.n, cfg.n, cfg.hold)
	time.Sleep(cfg.hold)
	held := snapshot()
	for _, p := range runs {
		if err := pingAll(cfg, p.conns); err != nil {
			closeProxies()
			return fmt.Errorf("%s after holding: %w", p.name, err)
		}
	}
	fmt.Printf("after holding: every tunnel still echoes; %d goroutines, %d descriptors, RSS %s, peak RSS %s\n",
		held.goroutines, held.fds, mib(held.rss), mib(held.hwm))

	fmt.Println("\nresults")
	fmt.Printf("  %-13s %8s %9s %9s %9s %9s %9s %12s %12s %10s\n", "proxy", "tunnels", "conns/s", "p50", "p90", "p99", "max",
		"Go mem/tun", "RSS/tun", "gor/tun")
	for _, p := range runs {
		lat := p.latencies
		per := func(v int64) string { return kib(float64(v) / float64(cfg.n)) }
		fmt.Printf("  %-13s %8d %9.0f %9s %9s %9s %9s %12s %12s %10.2f\n", p.name, cfg.n, float64(cfg.n)/p.wall.Seconds(),
			pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1].Round(time.Microsecond),
			per(p.mem.goInUse-directCost.goInUse), per(p.mem.rss-directCost.rss),
			float64(p.mem.goroutines-directCost.goroutines)/float64(cfg.n))
	}
	fmt.Printf("  (per tunnel: growth while open, less the growth for %d direct client/echo connections: Go %s, RSS %s, %.2f goroutines each)\n",
		cfg.n, kib(float64(directCost.goInUse)/float64(cfg.n)), kib(float64(directCost.rss)/float64(cfg.n)),
		float64(directCost.goroutines)/float64(cfg.n))
	fmt.Printf("  peak RSS (VmHWM) of the whole process: %s\n", mib(snapshot().hwm))

	for _, p := range runs {
		closeAll(p.conns)
		p.conns = nil
	}
	closeStart := time.Now()
	if err := settle(base, cfg.settle); err != nil {
		closeProxies()
		return fmt.Errorf("after closing the tunnels: %w", err)
	}
	after := snapshot()
	fmt.Printf("\nafter close (%v): %d goroutines (baseline %d), %d descriptors (baseline %d)\n",
		time.Since(closeStart).Round(time.Millisecond), after.goroutines, base.goroutines, after.fds, base.fds)
	if err := closeProxies(); err != nil {
		return fmt.Errorf("closing the proxies: %w", err)
	}
	return nil
}

// phase is one set of tunnels (or direct connections) opened together.
type phase struct {
	name      string
	conns     []net.Conn
	latencies []time.Duration // set-up, sorted
	wall      time.Duration
	mem       usage // growth while they are open
}

// openAll opens cfg.n connections with cfg.c at a time, each set up by open
// (nil: a direct connection) and checked with one echoed byte.
func openAll(cfg config, name string, dial func() (net.Conn, error), open opener, echoPort int) (*phase, error) {
	before := snapshot()
	p := &phase{name: name, conns: make([]net.Conn, cfg.n), latencies: make([]time.Duration, cfg.n)}
	next := make(chan int)
	errs := make(chan error, cfg.c)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(cfg.c, cfg.n) {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				c, err := dial()
				if err == nil {
					// Set-up is bounded; the deadline is cleared for the hold.
					c.SetDeadline(t0.Add(30 * time.Second))
					if open != nil {
						err = open(c, echoPort)
					}
				}
				if err == nil {
					p.latencies[i] = time.Since(t0)
					err = ping(c)
					c.SetDeadline(time.Time{})
				}
				if c != nil {
					p.conns[i] = c
				}
				if err != nil {
					errs <- fmt.Errorf("%s: tunnel %d: %w", name, i, err)
					return
				}
			}
		})
	}
	var firstErr error
feed:
	for i := range cfg.n {
		select {
		case next <- i:
		case firstErr = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	p.wall = time.Since(start)
	p.conns = slices.DeleteFunc(p.conns, func(c net.Conn) bool { return c == nil })
	if firstErr != nil {
		return p, firstErr
	}
	p.mem = snapshot().sub(before)
	slices.Sort(p.latencies)
	if open != nil {
		lat := p.latencies
		fmt.Printf("%-13s %d open in %v: %.0f conns/s; set-up p50 %v p90 %v p99 %v max %v\n", name, cfg.n,
			p.wall.Round(time.Millisecond), float64(cfg.n)/p.wall.Seconds(), pct(lat, 50), pct(lat, 90), pct(lat, 99),
			lat[len(lat)-1].Round(time.Microsecond))
	} else {
		fmt.Printf("%-13s %d open in %v (reference for memory)\n", name, cfg.n, p.wall.Round(time.Millisecond))
	}
	return p, nil
}

// ping sends one byte and reads it back.
func ping(c net.Conn) error {
	if _, err := c.Write([]byte{'x'}); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	return nil
}

// pingAll checks every connection, a bounded number at a time.
func pingAll(cfg config, conns []net.Conn) error {
	sem := make(chan struct{}, cfg.c)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for i, c := range conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			err := ping(c)
			c.SetDeadline(time.Time{})
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("tunnel %d: %w", i, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// settle waits, within bound, for goroutines and descriptors to come back
// to base.
func settle(base usage, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		// Spliced copies cache pipes that only finalizers close.
		runtime.GC()
		now := snapshot()
		if now.goroutines <= base.goroutines && now.fds <= base.fds {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutines %d (baseline %d), descriptors %d (baseline %d) after waiting %v",
				now.goroutines, base.goroutines, now.fds, base.fds, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// usage is a moment's resource use.
type usage struct {
	goroutines, fds int
	goInUse         int64 // Go runtime memory in use: mapped, less free and released heap
	rss, hwm        int64 // VmRSS and VmHWM, bytes
}

func (u usage) sub(v usage) usage {
	return usage{goroutines: u.goroutines - v.goroutines, fds: u.fds - v.fds,
		goInUse: u.goInUse - v.goInUse, rss: u.rss - v.rss, hwm: u.hwm}
}

func snapshot() usage {
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(s)
	u := usage{goroutines: runtime.NumGoroutine(), fds: countFDs()}
	u.goInUse = int64(s[0].Value.Uint64() - s[1].Value.Uint64() - s[2].Value.Uint64())
	u.rss, u.hwm = procStatus("VmRSS:"), procStatus("VmHWM:")
	return u
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// procStatus reads a "kB" field of /proc/self/status, in bytes; -1 if absent.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// raiseNoFile raises the soft descriptor limit to the hard one.
func raiseNoFile() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, 0, fmt.Errorf("raising RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, lim.Max, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)].Round(time.Microsecond)
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
func mib(b int64) string   { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func addrPort(l net.Listener) netip.AddrPort { return netip.MustParseAddrPort(l.Addr().String()) }

// staticResolver answers the test name with 127.0.0.1 and nothing else.
type staticResolver struct{}

func (staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if strings.TrimSuffix(host, ".") == echoName {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// echoServer echoes each connection until EOF, with a small buffer so that
// it weighs little next to the proxies.
type echoServer struct {
	l    net.Listener
	addr string
	port int
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

func startEcho() (*echoServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &echoServer{l: l, addr: l.Addr().String(), port: l.Addr().(*net.TCPAddr).Port, open: map[net.Conn]struct{}{}}
	e.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.open[c] = struct{}{}
			e.mu.Unlock()
			e.wg.Go(func() {
				defer func() {
					e.mu.Lock()
					delete(e.open, c)
					e.mu.Unlock()
					c.Close()
				}()
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	return e, nil
}

func (e *echoServer) close() {
	e.l.Close()
	e.mu.Lock()
	for c := range e.open {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}
