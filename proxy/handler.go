package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/hermetic-dev/hermetic/internal/tunnel"
	"github.com/hermetic-dev/hermetic/policy"
)

// lingerTimeout bounds how long a refused CONNECT's connection is drained
// after the response, so that closing it does not reset the connection
// before the client has read the refusal. Drained bytes are discarded.
const (
	lingerTimeout = 500 * time.Millisecond
	lingerBytes   = 256 << 10
)

// newTransport builds the upstream transport for plain-HTTP forwarding.
// goproxy's default transport reads HTTP(S)_PROXY and skips TLS
// verification; this one never uses a proxy and dials only through the
// guarded dialer.
func (s *Server) newTransport() *http.Transport {
	return &http.Transport{
		Proxy:       nil,
		DialContext: s.dialUpstream,
		// Keep-alives are off so that every forwarded request is dialled,
		// and therefore decided and recorded, on its own.
		DisableKeepAlives: true,
		// The proxy passes bodies through as they are; it neither asks for
		// gzip nor decodes it.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		ResponseHeaderTimeout:  s.opts.IdleTimeout,
		// No HTTP/2 upstream: forwarding is plain http:// only.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// newGoproxy configures goproxy so that none of its defaults can bypass the
// policy: its constructor reads HTTPS_PROXY into ConnectDial and gives the
// transport ProxyFromEnvironment, both replaced here.
func (s *Server) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = logfLogger(s.opts.Logf)
	gp.Verbose = false
	gp.Tr = s.tr
	gp.ConnectDial = nil
	// CONNECT is relayed by s.tunnel; should goproxy ever dial for a
	// CONNECT itself, it still goes through the policy.
	gp.ConnectDialWithReq = func(r *http.Request, network, addr string) (net.Conn, error) {
		return s.dialUpstream(r.Context(), network, addr)
	}
	gp.KeepAcceptEncoding = true
	gp.KeepHeader = false
	gp.AllowHTTP2 = false
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		badRequest(w, errOriginForm)
	})

	connect := &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: s.tunnel}
	gp.OnRequest().HandleConnectFunc(func(string, *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return connect, ""
	})
	gp.OnRequest().DoFunc(prepareForward)
	gp.OnResponse().DoFunc(finishForward)
	return gp
}

var (
	errOriginForm = errors.New("not a proxy request: send the absolute URL (GET http://host/path) or CONNECT host:port")
	errScheme     = errors.New("only http:// URLs are forwarded; use CONNECT for https")
)

// serveHTTP validates the request target before goproxy sees it: goproxy
// would forward origin-form requests by Host header and dial the local
// machine for an empty CONNECT host.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Authentication comes first: a client without the run's credentials
	// learns nothing about the policy, not even how its request is
	// malformed, and nothing is decided, resolved or dialled for it.
	if s.opts.Credentials.Enabled() {
		given := r.Header.Values("Proxy-Authorization")
		// Proxy-Authorization is for this proxy alone (RFC 9110 §11.7.2):
		// it is never forwarded, whatever the outcome.
		r.Header.Del("Proxy-Authorization")
		ca, _ := r.Context().Value(clientAuthKey{}).(*clientAuth)
		if !s.authorized(given) {
			wrong := len(given) > 0
			if wrong {
				// A missing header is the normal first step of clients that
				// wait for the challenge; a wrong one is worth a line. The
				// value itself is never logged.
				s.logf("proxy authentication failed for a client at %s", r.RemoteAddr)
			}
			// A plain request's connection is kept for one retry only, and
			// only for the handshake timeout: otherwise any local process
			// could fill the connection limit with idle, unauthenticated
			// connections and stall the run's own clients. A CONNECT's
			// ends (what follows it is tunnel data, never a request).
			keep := r.Method != http.MethodConnect && !wrong && ca != nil &&
				ca.challenged.CompareAndSwap(false, true)
			if keep {
				time.AfterFunc(s.opts.HandshakeTimeout, func() {
					if !ca.ok.Load() {
						ca.conn.Close()
					}
				})
			}
			requireAuth(w, wrong, keep)
			return
		}
		if ca != nil {
			ca.ok.Store(true)
		}
	}
	if r.Method == http.MethodConnect {
		if _, err := connectTarget(r); err != nil {
			badRequest(w, err)
			return
		}
		s.gp.ServeHTTP(&connectWriter{ResponseWriter: w}, r)
		return
	}
	if err := checkForwardTarget(r); err != nil {
		badRequest(w, err)
		return
	}
	rc := http.NewResponseController(w)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: s.opts.IdleTimeout}
	}
	s.gp.ServeHTTP(&idleWriter{ResponseWriter: w, rc: rc, idle: s.opts.IdleTimeout}, r)
}

// connectTarget returns the authority of a CONNECT request. The request
// line is the only source: RFC 9110 §9.3.6 requires host and port, and an
// empty host would make a naive dialer connect to the local machine.
func connectTarget(r *http.Request) (string, error) {
	target := r.RequestURI
	if target == "" || strings.HasPrefix(target, "/") {
		return "", errors.New("CONNECT needs host:port")
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("CONNECT needs host:port: %v", err)
	}
	if host == "" {
		return "", errors.New("CONNECT with an empty host")
	}
	if _, err := policy.ParsePort(port); err != nil {
		return "", fmt.Errorf("CONNECT: %v", err)
	}
	return target, nil
}

// checkForwardTarget accepts only absolute-form http:// requests with a host.
func checkForwardTarget(r *http.Request) error {
	u := r.URL
	switch {
	case !u.IsAbs():
		return errOriginForm
	case u.Scheme != "http":
		return errScheme
	case u.Opaque != "":
		return errors.New("malformed URL")
	case u.User != nil:
		return errors.New("user information in the URL is not forwarded")
	case u.Hostname() == "":
		return errors.New("URL without a host")
	}
	if p := u.Port(); p != "" {
		if _, err := policy.ParsePort(p); err != nil {
			return err
		}
	}
	return nil
}

// authorized reports whether the request carried exactly one
// Proxy-Authorization and it holds the run's credentials. Several values are
// refused rather than tried in turn, so that a client cannot make more than
// one guess per request.
func (s *Server) authorized(given []string) bool {
	return len(given) == 1 && s.opts.Credentials.MatchBasic(given[0])
}

// requireAuth answers 407 with the Basic challenge. Unless keep, the
// connection ends; a kept one carries the retry with credentials, which is
// how clients that wait for the challenge (libcurl with CURLAUTH_ANY, as git
// uses it) proceed.
func requireAuth(w http.ResponseWriter, wrong, keep bool) {
	h := w.Header()
	h.Set("Proxy-Authenticate", `Basic realm="hermetic"`)
	if !keep {
		h.Set("Connection", "close")
	}
	msg := "hermetic: proxy authentication required: this proxy serves only the program hermetic runs, " +
		"which has the credentials in its HTTP_PROXY/HTTPS_PROXY/ALL_PROXY URLs"
	if wrong {
		msg = "hermetic: proxy authentication failed: wrong or malformed Proxy-Authorization (Basic user:password expected)"
	}
	http.Error(w, msg, http.StatusProxyAuthRequired)
}

// badRequest answers 400 and ends the connection: after a malformed request
// the rest of the stream cannot be trusted to be HTTP.
func badRequest(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	http.Error(w, "hermetic: "+oneLine(err.Error()), http.StatusBadRequest)
}

// tunnel relays a CONNECT. It runs on the hijacked client connection; the
// decision is the dialer's, made on the request-target's authority.
func (s *Server) tunnel(r *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
	conn, early := client, []byte(nil)
	if hc, ok := client.(*hijackedConn); ok {
		conn, early = hc.Conn, hc.buffered
	}
	defer s.releaseClient(conn)
	defer conn.Close()

	target, err := connectTarget(r)
	if err != nil {
		writeResponse(conn, r, http.StatusBadRequest, nil, "hermetic: "+err.Error())
		return
	}
	// Not r.Context(): net/http cancels it when the client half-closes,
	// which a tunnel must allow; Close still cancels s.ctx.
	up, _, err := s.opts.Dialer.Dial(s.ctx, policy.ComponentHTTP, "tcp", target)
	if err != nil {
		if d, ok := policy.IsDenied(err); ok {
			writeResponse(conn, r, http.StatusForbidden, refusalHeader(d), oneLine(d.Refusal()))
		} else {
			code, msg := upstreamFailure(target, err)
			writeResponse(conn, r, code, nil, msg)
		}
		// Whatever the client sent after the CONNECT is read and dropped,
		// never forwarded.
		linger(conn)
		return
	}
	if !s.trackUpstream(up) {
		up.Close()
		return
	}
	defer s.untrackUpstream(up)

	conn.SetWriteDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	_, err = fmt.Fprintf(conn, "HTTP/%d.%d 200 Connection established\r\n\r\n", protoMajor(r), r.ProtoMinor)
	conn.SetWriteDeadline(time.Time{})
	if err == nil && len(early) > 0 {
		// Bytes the client sent right behind the CONNECT (a TLS
		// ClientHello, say) were read into net/http's buffer; goproxy drops
		// them, so they are replayed here.
		up.SetWriteDeadline(time.Now().Add(s.opts.IdleTimeout))
		_, err = up.Write(early)
		up.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		up.Close()
		return
	}
	if _, _, err := tunnel.Join(conn, up, s.opts.IdleTimeout); err != nil && !errors.Is(err, net.ErrClosed) {
		s.logf("tunnel to %s: %v", target, err)
	}
}

// dialUpstream is the only way the transport reaches an upstream.
func (s *Server) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	s.dialing.Add(1)
	defer s.dialing.Add(-1)
	c, err := s.opts.Dialer.DialContext(ctx, policy.ComponentHTTP, network, addr)
	if err != nil {
		return nil, err
	}
	ic := &idleConn{Conn: c, idle: s.opts.IdleTimeout, s: s}
	if !s.trackUpstream(ic) {
		c.Close()
		return nil, net.ErrClosed
	}
	return ic, nil
}

// prepareForward makes a request fit to forward: hop-by-hop headers go, and
// Host is rewritten to the request-target's authority (RFC 9112 §3.2.2),
// which is also what the transport dials and the policy decides on.
func prepareForward(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	removeHopByHop(r.Header)
	// Trailers are hop-by-hop framing too, and may carry a Host.
	r.Trailer = nil
	r.Host = r.URL.Host
	return r, nil
}

// finishForward turns a refused dial into the documented 403 (goproxy would
// answer 500 with the error text) and strips hop-by-hop headers from
// upstream responses, which also keeps goproxy's websocket path, with its
// unbounded relay, out of reach.
func finishForward(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	req := ctx.Req
	if resp == nil {
		if d, ok := policy.IsDenied(ctx.Error); ok {
			return newResponse(req, http.StatusForbidden, refusalHeader(d), oneLine(d.Refusal()))
		}
		code, msg := upstreamFailure(req.URL.Host, ctx.Error)
		return newResponse(req, code, nil, msg)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
		return newResponse(req, http.StatusBadGateway, nil, "hermetic: protocol upgrades are not forwarded; use CONNECT")
	}
	removeHopByHop(resp.Header)
	return resp
}

// upstreamFailure describes an upstream that the policy allowed but that
// could not be reached or did not answer: 504 when it was a timeout (the
// name did not resolve in time, the connection or the response header did
// not come), 502 otherwise. The message is one line naming the destination.
func upstreamFailure(target string, err error) (int, string) {
	msg := "hermetic: cannot reach " + target
	if err == nil {
		return http.StatusBadGateway, oneLine(msg)
	}
	msg += ": " + strings.TrimPrefix(err.Error(), "hermetic: ")
	if isTimeout(err) {
		return http.StatusGatewayTimeout, oneLine(msg + " (timed out)")
	}
	return http.StatusBadGateway, oneLine(msg)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// removeHopByHop deletes the headers RFC 9110 §7.6.1 says a proxy must not
// forward: those named by Connection and the well-known hop-by-hop ones.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for k := range h {
		switch textproto.CanonicalMIMEHeaderKey(k) {
		case "Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer",
			"Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Proxy-Authenticate":
			delete(h, k)
		}
	}
}

func refusalHeader(d policy.Decision) http.Header {
	return http.Header{"X-Hermetic-Decision": {string(d.Reason)}}
}

func newResponse(req *http.Request, code int, h http.Header, msg string) *http.Response {
	body := msg + "\n"
	if h == nil {
		h = make(http.Header)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	return &http.Response{
		StatusCode:    code,
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// writeResponse writes a complete response on a hijacked connection. The
// connection is about to close, and the response says so.
func writeResponse(c net.Conn, r *http.Request, code int, h http.Header, msg string) {
	resp := newResponse(r, code, h, msg)
	resp.ProtoMajor, resp.ProtoMinor = protoMajor(r), r.ProtoMinor
	resp.Proto = fmt.Sprintf("HTTP/%d.%d", resp.ProtoMajor, resp.ProtoMinor)
	resp.Close = true
	resp.Request = nil // a CONNECT request would make Write omit the body
	c.SetWriteDeadline(time.Now().Add(lingerTimeout))
	bw := bufio.NewWriter(c)
	if resp.Write(bw) == nil {
		bw.Flush()
	}
	c.SetWriteDeadline(time.Time{})
}

// linger half-closes c and discards what the client still sends, briefly,
// so that the close does not reset the connection before the client has
// read the response.
func linger(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.Copy(io.Discard, io.LimitReader(c, lingerBytes))
}

func protoMajor(r *http.Request) int {
	if r.ProtoMajor == 0 {
		return 1
	}
	return r.ProtoMajor
}

// oneLine keeps a message on one line, whatever an error or hint contains.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// connectWriter gives goproxy a Hijack that keeps the bytes net/http has
// already read past the CONNECT header; goproxy's own handling drops them.
type connectWriter struct {
	http.ResponseWriter
}

func (w *connectWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	hc := &hijackedConn{Conn: c}
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		hc.buffered = bytes.Clone(b)
	}
	return hc, rw, nil
}

// hijackedConn carries a hijacked client connection and the bytes that were
// buffered when it was hijacked to Server.tunnel.
// clientAuth is what the server knows of one client connection's
// authentication: whether a request on it carried the credentials, and
// whether it has already had its one challenge.
type clientAuth struct {
	conn       net.Conn
	ok         atomic.Bool
	challenged atomic.Bool
}

type clientAuthKey struct{}

type hijackedConn struct {
	net.Conn
	buffered []byte
}

// idleWriter refreshes the client connection's write deadline on every
// write, so a client that stops reading a forwarded response is dropped
// after the idle timeout instead of holding its slot forever.
type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleWriter) touch() { w.rc.SetWriteDeadline(time.Now().Add(w.idle)) }

func (w *idleWriter) WriteHeader(code int) {
	w.touch()
	w.ResponseWriter.WriteHeader(code)
}

func (w *idleWriter) Write(p []byte) (int, error) {
	w.touch()
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) Flush() {
	w.touch()
	w.rc.Flush()
}

// Hijack refuses: a forwarded request never becomes a raw relay (goproxy
// would otherwise relay a websocket upgrade with no timeout).
func (w *idleWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("hermetic: upgrades are not forwarded; use CONNECT")
}

func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// idleBody refreshes the client connection's read deadline while a request
// body is read. At the end of the body it clears the deadline, so that
// net/http's background read during a long response is not cut short; an
// unfinished body keeps it, so that draining it on Close is bounded too.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	eof  atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *idleBody) Close() error {
	if !b.eof.Load() {
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	return b.ReadCloser.Close()
}

// idleConn is an upstream connection of the transport: every read and write
// refreshes its deadline, so a stalled upstream is dropped after the idle
// timeout, and closing it forgets it.
type idleConn struct {
	net.Conn
	idle time.Duration
	s    *Server
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

func (c *idleConn) Close() error {
	c.s.untrackUpstream(c)
	return c.Conn.Close()
}
