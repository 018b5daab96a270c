package dnsfilter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/miekg/dns"
)

// HostUpstreams reads the name servers of a resolv.conf (normally the
// host's /etc/resolv.conf, read before the namespace mounts its own over
// it) as "ip:port" strings. Servers on loopback are returned too: the
// filter forwards from the host's network, where the host's loopback
// resolver (systemd-resolved, dnsmasq) is the right one to ask.
func HostUpstreams(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseResolvConf(io.LimitReader(f, 1<<20))
}

// ParseResolvConf reads the name servers of a resolv.conf. A file with no
// usable nameserver line means the C library's default, 127.0.0.1.
func ParseResolvConf(r io.Reader) ([]string, error) {
	cc, err := dns.ClientConfigFromReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading resolv.conf: %w", err)
	}
	var out []string
	for _, s := range cc.Servers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		out = append(out, net.JoinHostPort(a.String(), "53"))
		if len(out) == 3 { // as many as the C library uses
			break
		}
	}
	if len(out) == 0 {
		out = []string{"127.0.0.1:53"}
	}
	return out, nil
}

// Exchanger sends one query upstream and returns the answer.
type Exchanger interface {
	Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error)
}

// Forwarder is the Exchanger that asks a list of name servers in order,
// over UDP and, when the answer is truncated, again over TCP.
type Forwarder struct {
	// Servers are "ip:port" addresses, asked in order until one answers.
	Servers []string
	// Timeout bounds each attempt; zero means 3 seconds.
	Timeout time.Duration
}

// upstreamUDPSize is the EDNS buffer size the forwarder advertises: the
// DNS flag day 2020 value, which avoids IP fragmentation.
const upstreamUDPSize = 1232

// Exchange implements Exchanger.
func (f *Forwarder) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	if len(f.Servers) == 0 {
		return nil, errors.New("dnsfilter: no upstream name servers")
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	var lastErr error
	for _, s := range f.Servers {
		r, err := exchangeOne(ctx, q, s, timeout)
		if err == nil {
			return r, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func exchangeOne(ctx context.Context, q *dns.Msg, server string, timeout time.Duration) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", UDPSize: upstreamUDPSize, Timeout: timeout}
	r, _, err := c.ExchangeContext(ctx, q, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, q, server)
	}
	if err != nil {
		return nil, err
	}
	if err := matchesQuestion(q, r); err != nil {
		return nil, err
	}
	return r, nil
}

// matchesQuestion checks that an answer answers q: same question, so an
// answer for another name can never be filtered as if it were for this one.
func matchesQuestion(q, r *dns.Msg) error {
	if !r.Response || len(r.Question) != 1 {
		return errors.New("dnsfilter: malformed upstream answer")
	}
	a, b := q.Question[0], r.Question[0]
	if a.Qtype != b.Qtype || a.Qclass != b.Qclass || !equalFold(a.Name, b.Name) {
		return errors.New("dnsfilter: upstream answered another question")
	}
	return nil
}

// equalFold compares names case-insensitively in ASCII only, as DNS does.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
