package dnsfilter

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/netutil"
)

// Limits on what clients can make the servers hold.
const (
	// udpReadSize is the read buffer for one UDP query. Queries are
	// small; a larger datagram is read truncated and answered FORMERR.
	udpReadSize = 4096
	// maxTCPConns bounds the TCP connections served at once.
	maxTCPConns = 64
	ioTimeout   = 5 * time.Second
	tcpIdle     = 10 * time.Second
)

// servers tracks what a Filter serves so that Close can stop it, even when
// Close comes before a server has started.
type servers struct {
	mu     sync.Mutex
	closed bool
	list   []*dns.Server
	wg     sync.WaitGroup
}

// ServeDNS implements dns.Handler: it answers req and fits the answer to
// the transport (RFC 6891 sizes and truncation over UDP).
func (f *Filter) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	defer func() {
		// A bug in answering one query must not take the run down.
		if recover() != nil {
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			w.WriteMsg(m)
		}
	}()
	resp := f.Answer(context.Background(), req)
	if resp == nil {
		return
	}
	resp.Compress = true
	size := dns.MaxMsgSize
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		size = clientUDPSize(req)
	}
	resp.Truncate(size)
	w.WriteMsg(resp)
}

// clientUDPSize is the largest answer the client can take over UDP: 512
// without EDNS, else its advertised size, never more than the filter's
// own (which keeps answers unfragmented).
func clientUDPSize(req *dns.Msg) int {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	return min(size, serverUDPSize)
}

// acceptQuery drops responses and rejects what a stub resolver never
// sends, before it is parsed further.
func acceptQuery(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if dh.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	if int(dh.Bits>>11)&0xF != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	if dh.Qdcount != 1 || dh.Ancount != 0 || dh.Nscount != 0 || dh.Arcount > 1 {
		return dns.MsgReject
	}
	return dns.MsgAccept
}

func (f *Filter) newServer() *dns.Server {
	return &dns.Server{
		Handler:       f,
		UDPSize:       udpReadSize,
		ReadTimeout:   ioTimeout,
		WriteTimeout:  ioTimeout,
		IdleTimeout:   func() time.Duration { return tcpIdle },
		MaxTCPQueries: 128,
		MsgAcceptFunc: acceptQuery,
	}
}

// ServePacket answers queries arriving on pc (UDP) until Close. It returns
// nil after Close.
func (f *Filter) ServePacket(pc net.PacketConn) error {
	s := f.newServer()
	s.PacketConn = pc
	return f.serve(s, pc.Close)
}

// Serve answers queries arriving on l (TCP) until Close. It returns nil
// after Close.
func (f *Filter) Serve(l net.Listener) error {
	s := f.newServer()
	s.Listener = netutil.LimitListener(l, maxTCPConns)
	return f.serve(s, l.Close)
}

func (f *Filter) serve(s *dns.Server, closeConn func() error) error {
	f.srv.mu.Lock()
	if f.srv.closed {
		f.srv.mu.Unlock()
		closeConn()
		return nil
	}
	f.srv.list = append(f.srv.list, s)
	f.srv.wg.Add(1)
	f.srv.mu.Unlock()
	defer f.srv.wg.Done()

	err := s.ActivateAndServe()
	f.srv.mu.Lock()
	closed := f.srv.closed
	f.srv.mu.Unlock()
	if closed {
		return nil
	}
	return err
}

// Close stops every server and waits for them to return.
func (f *Filter) Close() error {
	f.srv.mu.Lock()
	if f.srv.closed {
		f.srv.mu.Unlock()
		return nil
	}
	f.srv.closed = true
	list := f.srv.list
	f.srv.mu.Unlock()
	var errs []error
	for _, s := range list {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		if err := shutdown(ctx, s); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	f.srv.wg.Wait()
	return errors.Join(errs...)
}

// shutdown stops s whether or not it has started: a server not yet started
// refuses Shutdown, so its connection is closed under it instead.
func shutdown(ctx context.Context, s *dns.Server) error {
	if err := s.ShutdownContext(ctx); err == nil {
		return nil
	}
	if s.PacketConn != nil {
		s.PacketConn.Close()
	}
	if s.Listener != nil {
		s.Listener.Close()
	}
	return nil
}
