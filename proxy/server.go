package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/hermetic-dev/hermetic/internal/proxyauth"
	"github.com/hermetic-dev/hermetic/policy"
)

// Options configures a Server. Zero values mean the documented defaults.
type Options struct {
	// Dialer is the one guarded dialer every upstream connection goes
	// through; required.
	Dialer *policy.Dialer
	// MaxConns bounds concurrent client connections; 0 means 512.
	MaxConns int
	// HandshakeTimeout bounds reading a request's header; 0 means 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a tunnel (or a forwarded exchange) when no byte
	// moves either way for this long; 0 means 5m.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header; 0 means 64 KiB.
	MaxHeaderBytes int
	// Logf, if set, receives diagnostics. Decisions are not logged here:
	// the Dialer's Recorder receives them.
	Logf func(format string, args ...any)
	// Credentials, when set, are required of every request as Basic
	// Proxy-Authorization (407 otherwise), so that only the run that was
	// given them can use the proxy. The zero value serves any client.
	Credentials Credentials
}

// Credentials are a proxy user and password; see Options.Credentials.
type Credentials = proxyauth.Credentials

// NewCredentials returns random per-run credentials (crypto/rand; letters
// and digits only, so they go into a proxy URL unescaped).
func NewCredentials() (Credentials, error) { return proxyauth.Generate() }

const (
	defaultMaxConns         = 512
	defaultHandshakeTimeout = 10 * time.Second
	defaultIdleTimeout      = 5 * time.Minute
	defaultMaxHeaderBytes   = 64 << 10

	// maxResponseHeaderBytes bounds what an upstream may send as a header;
	// net/http's own default (10 MiB) is far more than any real server needs.
	maxResponseHeaderBytes = 1 << 20
)

// Server is the HTTP proxy. Create it with New, run it with Serve and stop it
// with Close.
type Server struct {
	opts Options
	gp   *goproxy.ProxyHttpServer
	tr   *http.Transport
	hs   *http.Server

	// ctx is the parent of every request's context, so that Close aborts
	// dials and forwarded requests in flight.
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	closed    bool
	clients   map[net.Conn]struct{}
	upstreams map[net.Conn]struct{}
	// wg counts tracked client connections: each is released when net/http
	// closes it or, once hijacked for a tunnel, when the tunnel ends.
	wg sync.WaitGroup
	// dialing counts the transport's upstream dials in flight: net/http
	// finishes a dial in its own goroutine even after the request that
	// asked for it was abandoned, so a decision can be recorded after its
	// client has gone.
	dialing atomic.Int64
}

// New returns a proxy server that reaches upstreams only through
// opts.Dialer.
func New(opts Options) (*Server, error) {
	if opts.Dialer == nil || opts.Dialer.Policy == nil {
		return nil, errors.New("proxy: Options.Dialer with a Policy is required")
	}
	if opts.MaxConns < 0 || opts.HandshakeTimeout < 0 || opts.IdleTimeout < 0 || opts.MaxHeaderBytes < 0 {
		return nil, errors.New("proxy: negative limit in Options")
	}
	if err := opts.Credentials.Validate(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = defaultMaxConns
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = defaultHandshakeTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	if opts.MaxHeaderBytes == 0 {
		opts.MaxHeaderBytes = defaultMaxHeaderBytes
	}

	s := &Server{
		opts:      opts,
		sem:       make(chan struct{}, opts.MaxConns),
		done:      make(chan struct{}),
		clients:   make(map[net.Conn]struct{}),
		upstreams: make(map[net.Conn]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.tr = s.newTransport()
	s.gp = s.newGoproxy()

	var protos http.Protocols
	protos.SetHTTP1(true)
	s.hs = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: opts.HandshakeTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		ConnState:         s.connState,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, clientAuthKey{}, &clientAuth{conn: c})
		},
		ErrorLog:                     log.New(logWriter(opts.Logf), "proxy: ", 0),
		DisableGeneralOptionsHandler: true,
		Protocols:                    &protos,
	}
	return s, nil
}

// Serve accepts client connections on l until Close is called; it then
// returns nil. It closes l.
func (s *Server) Serve(l net.Listener) error {
	err := s.hs.Serve(&limitListener{Listener: l, sem: s.sem, done: s.done})
	select {
	case <-s.done:
		// Close was called; whichever error ended Serve is its doing.
		return nil
	default:
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops accepting, closes every client and upstream connection
// (tunnels included) and waits until every connection has been released.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()

	s.cancel()
	err := s.hs.Close()
	s.tr.CloseIdleConnections()

	// Close outside the lock: closing an upstream untracks it, which
	// takes the lock again.
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.clients)+len(s.upstreams))
	for c := range s.clients {
		conns = append(conns, c)
	}
	for c := range s.upstreams {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}

	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// connState tracks client connections from net/http's point of view.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			<-s.sem
			return
		}
		s.clients[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
	case http.StateIdle:
		// Per-write deadlines of the last response must not outlive it:
		// net/http writes its own early errors (431, 400) without setting one.
		c.SetWriteDeadline(time.Time{})
	case http.StateClosed:
		s.releaseClient(c)
	}
}

// releaseClient forgets a client connection; it runs once per connection,
// when net/http closes it or when its tunnel ends.
func (s *Server) releaseClient(c net.Conn) {
	s.mu.Lock()
	_, ok := s.clients[c]
	delete(s.clients, c)
	s.mu.Unlock()
	if ok {
		<-s.sem
		s.wg.Done()
	}
}

// trackUpstream records an upstream connection so that Close can close it.
// It reports false once the server is closed; the caller must then close c.
func (s *Server) trackUpstream(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.upstreams[c] = struct{}{}
	return true
}

func (s *Server) untrackUpstream(c net.Conn) {
	s.mu.Lock()
	delete(s.upstreams, c)
	s.mu.Unlock()
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// limitListener bounds concurrent client connections. Unlike
// netutil.LimitListener it hands out the accepted connection itself, not a
// wrapper, so hijacked tunnels keep *net.TCPConn's CloseWrite and fast copy
// paths; the slot is given back by Server.releaseClient.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done <-chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return c, nil
}

// logWriter adapts Options.Logf to the io.Writer that log.Logger wants.
func logWriter(logf func(string, ...any)) io.Writer {
	if logf == nil {
		return io.Discard
	}
	return logfWriter(logf)
}

type logfWriter func(string, ...any)

func (f logfWriter) Write(p []byte) (int, error) {
	f("%s", trimNewline(string(p)))
	return len(p), nil
}

// logfLogger adapts Options.Logf to goproxy.Logger.
type logfLogger func(string, ...any)

func (f logfLogger) Printf(format string, args ...any) {
	if f != nil {
		f(format, args...)
	}
}

func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
