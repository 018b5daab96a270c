// Package socks is hermetic's SOCKS5 proxy: it serves RFC 1928 CONNECT
// requests and makes every upstream connection through the policy's guarded
// dialer, so a destination is decided before anything is resolved or dialled.
//
// The wire protocol is parsed by github.com/things-go/go-socks5. The library
// is configured so that it only parses and negotiates: it never resolves a
// name (the resolver hands the name through untouched), never dials (CONNECT
// is handled here), and never serves BIND or UDP ASSOCIATE (both answer
// "command not supported"). Deadlines, the connection limit, tracking for
// shutdown and the tunnel are this package's, because the library has none.
package socks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	socks5 "github.com/things-go/go-socks5"
	"github.com/things-go/go-socks5/statute"

	"github.com/hermetic-dev/hermetic/internal/proxyauth"
	"github.com/hermetic-dev/hermetic/internal/tunnel"
	"github.com/hermetic-dev/hermetic/policy"
)

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	Dialer           *policy.Dialer                   // the one guarded dialer; required
	MaxConns         int                              // concurrent client connections; 0 means 512
	HandshakeTimeout time.Duration                    // deadline for the greeting and request together; 0 means 10s
	IdleTimeout      time.Duration                    // a tunnel with no traffic either way for this long is closed; 0 means 5m
	Logf             func(format string, args ...any) // optional diagnostics, may be nil
	// Credentials, when set, make username/password (RFC 1929) the only
	// method offered: a client that does not offer it gets "no acceptable
	// methods" (0xFF), one with wrong credentials an authentication failure
	// (status 1), and either connection is closed. The zero value offers
	// "no authentication" only, as before.
	Credentials Credentials
}

// Credentials are a proxy user and password; see Options.Credentials.
type Credentials = proxyauth.Credentials

// NewCredentials returns random per-run credentials (crypto/rand; letters
// and digits only).
func NewCredentials() (Credentials, error) { return proxyauth.Generate() }

// Server is a SOCKS5 proxy. It is safe for concurrent use; Serve may be
// called for several listeners.
type Server struct {
	opts Options
	lib  *socks5.Server
	// ctx is cancelled by Close so that upstream dials in flight give up.
	ctx    context.Context
	cancel context.CancelFunc
	// slots holds one token per open client connection (MaxConns).
	slots chan struct{}
	done  chan struct{}

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // client and upstream connections
	wg        sync.WaitGroup        // one per client connection goroutine
}

// New returns a server that dials through opts.Dialer.
func New(opts Options) (*Server, error) {
	if opts.Dialer == nil || opts.Dialer.Policy == nil {
		return nil, errors.New("socks: Options.Dialer with a Policy is required")
	}
	if opts.MaxConns < 0 || opts.HandshakeTimeout < 0 || opts.IdleTimeout < 0 {
		return nil, errors.New("socks: MaxConns, HandshakeTimeout and IdleTimeout must not be negative")
	}
	if err := opts.Credentials.Validate(); err != nil {
		return nil, fmt.Errorf("socks: %w", err)
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 512
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &Server{
		opts:      opts,
		slots:     make(chan struct{}, opts.MaxConns),
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// Without credentials the library's default, "no authentication", is
	// the one method; with them, username/password replaces it entirely.
	auth := []socks5.Authenticator{socks5.NoAuthAuthenticator{}}
	if opts.Credentials.Enabled() {
		auth = []socks5.Authenticator{socks5.UserPassAuthenticator{Credentials: credentialStore(opts.Credentials)}}
	}
	s.lib = socks5.NewServer(
		socks5.WithLogger(libLogger(opts.Logf)),
		socks5.WithAuthMethods(auth),
		// The library resolves a name before its rules and handlers run
		// and would dial the address it got; the guarded dialer must see
		// the name itself, so resolution is a pass-through.
		socks5.WithResolver(passResolver{}),
		// Commands are refused by their handlers rather than by a RuleSet,
		// whose refusal is 0x02 (not allowed by ruleset), not 0x07.
		socks5.WithRule(socks5.NewPermitAll()),
		socks5.WithConnectHandle(s.connect),
		socks5.WithBindHandle(refuseCommand),
		socks5.WithAssociateHandle(refuseCommand),
		// Unreachable while the connect handle is set; if a library change
		// ever routes a dial here, it fails closed instead of using net.Dial.
		socks5.WithDial(func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("socks: library dial path is disabled")
		}),
	)
	return s, nil
}

// Serve accepts connections on l until Close is called, then returns nil.
// When MaxConns clients are connected it stops accepting, so new clients wait
// in the listen backlog until one leaves.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()

	var backoff time.Duration
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.done:
			return nil
		}
		c, err := l.Accept()
		if err != nil {
			<-s.slots
			if s.isClosed() {
				return nil
			}
			if !temporary(err) {
				return err
			}
			// Out of descriptors or similar: wait for connections to end
			// rather than spinning or giving up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.opts.Logf("socks: accept: %v; retrying in %v", err, backoff)
			select {
			case <-time.After(backoff):
			case <-s.done:
				return nil
			}
			continue
		}
		backoff = 0
		if !s.track(c, true) {
			c.Close()
			<-s.slots
			return nil
		}
		go s.serveConn(c)
	}
}

// Close stops accepting, closes every client and upstream connection, and
// waits for the goroutines serving them to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
		s.cancel()
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track registers c so that Close closes it; client connections also count
// in the WaitGroup. It reports false once the server is closed.
func (s *Server) track(c net.Conn, client bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	if client {
		s.wg.Add(1)
	}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		s.untrack(c)
		<-s.slots
		s.wg.Done()
	}()
	// The library has no deadlines. This one covers the greeting and the
	// request, whose sizes the protocol bounds (single-byte lengths: at most
	// 257 + 262 bytes), so a slow or silent client cannot hold a slot.
	c.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	if err := s.lib.ServeConn(c); err != nil && !s.isClosed() && !errors.Is(err, io.EOF) {
		s.opts.Logf("socks: %s: %v", c.RemoteAddr(), err)
	}
}

// connect handles a parsed CONNECT request. w is the client connection that
// Serve handed to the library; req.Reader holds the library's buffered
// reader, which may already hold bytes the client sent after the request.
func (s *Server) connect(_ context.Context, w io.Writer, req *socks5.Request) error {
	client, ok := w.(net.Conn)
	if !ok {
		socks5.SendReply(w, statute.RepServerFailure, nil)
		return fmt.Errorf("socks: client writer is %T, not a net.Conn", w)
	}
	hostport := destination(req.RawDestAddr)

	// The handshake is over; a slow upstream dial must not eat into it, and
	// the dialer bounds itself.
	client.SetDeadline(time.Time{})
	upstream, _, err := s.opts.Dialer.Dial(s.ctx, policy.ComponentSOCKS, "tcp", hostport)
	client.SetWriteDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	if err != nil {
		socks5.SendReply(client, replyCode(err), nil)
		if _, denied := policy.IsDenied(err); denied {
			// Not a fault: the Dialer's Recorder has the decision.
			return nil
		}
		// %q: the name is the client's and may hold control bytes.
		return fmt.Errorf("connect %q: %w", hostport, err)
	}
	if !s.track(upstream, false) {
		upstream.Close()
		socks5.SendReply(client, statute.RepServerFailure, nil)
		return nil
	}
	defer s.untrack(upstream)
	// BND.ADDR is 0.0.0.0:0: the host's outbound address and port are
	// none of the contained client's business (RFC 1928 lets clients
	// ignore it for CONNECT).
	bnd := &net.TCPAddr{IP: net.IPv4zero}
	if err := socks5.SendReply(client, statute.RepSuccess, bnd); err != nil {
		upstream.Close()
		return fmt.Errorf("connect %q: replying: %w", hostport, err)
	}

	var a net.Conn = client
	if br, ok := req.Reader.(*bufio.Reader); !ok || br.Buffered() > 0 {
		a = &prefixConn{Conn: client, r: req.Reader}
	}
	_, _, err = tunnel.Join(a, upstream, s.opts.IdleTimeout)
	if err != nil && !s.isClosed() {
		s.opts.Logf("socks: tunnel to %q: %v", hostport, err)
	}
	return nil
}

// destination is the request's target as HOST:PORT for the guarded dialer.
// A name goes through exactly as the client sent it, empty or hostile, so
// that the policy judges (and records) it: it refuses an empty or invalid
// name as invalid-host, so ":port" is never dialled.
func destination(a *statute.AddrSpec) string {
	port := strconv.Itoa(a.Port)
	switch a.AddrType {
	case statute.ATYPIPv4, statute.ATYPIPv6:
		addr, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			return net.JoinHostPort("", port)
		}
		if a.AddrType == statute.ATYPIPv4 {
			// The library stores IPv4 in 16-byte form.
			addr = addr.Unmap()
		}
		return net.JoinHostPort(addr.String(), port)
	}
	return net.JoinHostPort(a.FQDN, port)
}

// replyCode maps a dial error to the RFC 1928 reply that describes it.
func replyCode(err error) uint8 {
	if _, denied := policy.IsDenied(err); denied {
		return statute.RepRuleFailure
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return statute.RepConnectionRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return statute.RepNetworkUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EHOSTDOWN):
		return statute.RepHostUnreachable
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return statute.RepTTLExpired
	case errors.Is(err, context.Canceled):
		return statute.RepServerFailure
	}
	// Chiefly a name that did not resolve.
	return statute.RepHostUnreachable
}

func refuseCommand(_ context.Context, w io.Writer, req *socks5.Request) error {
	if err := socks5.SendReply(w, statute.RepCommandNotSupported, nil); err != nil {
		return err
	}
	return fmt.Errorf("command %d refused: only CONNECT is supported", req.Command)
}

// passResolver gives the library no address, so it keeps the name as sent.
type passResolver struct{}

func (passResolver) Resolve(ctx context.Context, _ string) (context.Context, net.IP, error) {
	return ctx, nil, nil
}

// credentialStore checks RFC 1929 credentials in constant time (the
// library's StaticCredentials compares with ==).
type credentialStore Credentials

func (c credentialStore) Valid(user, password, _ string) bool {
	return Credentials(c).Match(user, password)
}

type libLogger func(format string, args ...any)

func (l libLogger) Errorf(format string, args ...any) { l("socks: "+format, args...) }

// prefixConn reads first what the library buffered past the request, then
// the connection itself.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if br, ok := c.r.(*bufio.Reader); ok && br.Buffered() == 0 {
		return c.Conn.Read(p)
	}
	return c.r.Read(p)
}

// CloseWrite keeps half-close working through the wrapper.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
