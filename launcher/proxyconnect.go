package launcher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProxyConnect connects to host:port through the SOCKS5 proxy at socksAddr
// and copies stdin to the connection and the connection to stdout until both
// directions end. It serves `hermetic proxy-connect`, the ProxyCommand that
// GIT_SSH_COMMAND and GIT_PROXY_COMMAND name, so that ssh and git:// go
// through hermetic's policy with no dependency on nc or socat. The host is
// sent to the proxy as a name, never resolved here. auth, when set, is
// offered as RFC 1929 username/password authentication.
func ProxyConnect(ctx context.Context, socksAddr string, auth *url.Userinfo, host, port string, stdin io.Reader, stdout io.Writer) error {
	conn, err := socksDial(ctx, socksAddr, auth, host, port)
	if err != nil {
		return fmt.Errorf("proxy-connect: %w", err)
	}
	return pipe(conn, stdin, stdout)
}

// socksReplies are the RFC 1928 reply codes.
var socksReplies = map[byte]string{
	1: "general SOCKS server failure",
	2: "connection not allowed by ruleset",
	3: "network unreachable",
	4: "host unreachable",
	5: "connection refused",
	6: "TTL expired",
	7: "command not supported",
	8: "address type not supported",
}

// socksDial makes a SOCKS5 CONNECT (RFC 1928; with auth, RFC 1929
// username/password is offered too) and returns the proxy connection
// itself, so that closing its write side reaches the destination as EOF:
// ssh and git need that half-close.
func socksDial(ctx context.Context, socksAddr string, auth *url.Userinfo, host, port string) (*net.TCPConn, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	req := []byte{5, 1, 0} // version 5, CONNECT, reserved
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		if a.Is4() {
			req = append(req, 1)
		} else {
			req = append(req, 4)
		}
		req = append(req, a.AsSlice()...)
	} else {
		if host == "" || len(host) > 255 {
			return nil, fmt.Errorf("host %q: want a name of 1 to 255 bytes", host)
		}
		req = append(req, 3, byte(len(host)))
		req = append(req, host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(p))

	d := net.Dialer{Timeout: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", socksAddr)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.TCPConn)
	fail := func(err error) (*net.TCPConn, error) {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	greeting := []byte{5, 1, 0} // one method: no authentication
	var user, pass string
	if auth != nil {
		user = auth.Username()
		pass, _ = auth.Password()
		if len(user) == 0 || len(user) > 255 || len(pass) > 255 {
			return fail(errors.New("SOCKS5 credentials: want a user and a password of at most 255 bytes"))
		}
		greeting = []byte{5, 2, 0, 2} // no authentication, or username/password
	}
	if _, err := conn.Write(greeting); err != nil {
		return fail(err)
	}
	var b [4]byte
	if _, err := io.ReadFull(conn, b[:2]); err != nil {
		return fail(fmt.Errorf("SOCKS5 greeting: %w", err))
	}
	switch {
	case b[0] != 5:
		return fail(errors.New("not a SOCKS5 proxy"))
	case b[1] == 0:
	case b[1] == 2 && auth != nil:
		msg := append([]byte{1, byte(len(user))}, user...)
		msg = append(append(msg, byte(len(pass))), pass...)
		if _, err := conn.Write(msg); err != nil {
			return fail(err)
		}
		if _, err := io.ReadFull(conn, b[:2]); err != nil {
			return fail(fmt.Errorf("SOCKS5 authentication: %w", err))
		}
		if b[1] != 0 {
			return fail(errors.New("the SOCKS5 proxy refused the run's credentials"))
		}
	default:
		return fail(errors.New("the SOCKS5 proxy wants an authentication method hermetic does not offer"))
	}
	if _, err := conn.Write(req); err != nil {
		return fail(err)
	}
	if _, err := io.ReadFull(conn, b[:4]); err != nil {
		return fail(fmt.Errorf("SOCKS5 reply: %w", err))
	}
	if b[0] != 5 {
		return fail(errors.New("not a SOCKS5 reply"))
	}
	if b[1] != 0 {
		dest := net.JoinHostPort(host, port)
		if b[1] == 2 {
			return fail(fmt.Errorf("hermetic's policy refused %s", dest))
		}
		msg, ok := socksReplies[b[1]]
		if !ok {
			msg = fmt.Sprintf("SOCKS5 reply %d", b[1])
		}
		return fail(fmt.Errorf("%s: %s", dest, msg))
	}
	// Skip the bound address.
	var n int
	switch b[3] {
	case 1:
		n = 4
	case 4:
		n = 16
	case 3:
		if _, err := io.ReadFull(conn, b[:1]); err != nil {
			return fail(err)
		}
		n = int(b[0])
	default:
		return fail(fmt.Errorf("SOCKS5 reply: unknown address type %d", b[3]))
	}
	if _, err := io.ReadFull(conn, make([]byte, n+2)); err != nil {
		return fail(err)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// pipe copies in→conn and conn→out. When in ends, the connection's write
// side is closed so the peer sees EOF; pipe returns when the peer has
// finished sending.
func pipe(conn *net.TCPConn, in io.Reader, out io.Writer) error {
	defer conn.Close()
	upErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		conn.CloseWrite()
		upErr <- err
	}()
	_, err := io.Copy(out, conn)
	if f, ok := out.(*os.File); ok {
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("proxy-connect: %v", err)
	}
	// The peer closed its side; whatever stdin still holds has nowhere to
	// go, so do not wait for it.
	select {
	case err := <-upErr:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("proxy-connect: %v", err)
		}
	default:
	}
	return nil
}
