package launcher

import (
	"net"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/proxy"
	"github.com/hermetic-dev/hermetic/socks"
)

// proxyServer is what the HTTP and SOCKS5 proxy servers both provide.
type proxyServer interface {
	Serve(net.Listener) error
	Close() error
}

func newHTTPServer(d *policy.Dialer, creds proxy.Credentials) (proxyServer, error) {
	s, err := proxy.New(proxy.Options{Dialer: d, Credentials: creds})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newSOCKSServer(d *policy.Dialer, creds socks.Credentials) (proxyServer, error) {
	s, err := socks.New(socks.Options{Dialer: d, Credentials: creds})
	if err != nil {
		return nil, err
	}
	return s, nil
}
