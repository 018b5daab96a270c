//go:build !linux

package launcher

import (
	"errors"
	"io"
	"net"
	"os/exec"

	"github.com/hermetic-dev/hermetic/internal/nsinit"
)

// NetnsInit is kept for programs written against the earlier API; it does
// nothing (outside Linux there is no namespace at all).
func NetnsInit() {}

var errNetnsUnavailable = errors.New("network namespaces exist only on Linux")

type netnsSpec = nsinit.Spec

type netnsSockets struct {
	HTTP, SOCKS net.Listener
	DNSUDP      net.PacketConn
	DNSTCP      net.Listener
	Expose      []net.Listener
}

func (s *netnsSockets) Close() {
	for _, c := range []io.Closer{s.HTTP, s.SOCKS, s.DNSUDP, s.DNSTCP} {
		if c != nil {
			c.Close()
		}
	}
}

type netnsStart struct{}

func netnsCommand(*exec.Cmd, netnsSpec) (*netnsStart, error) { return nil, errNetnsUnavailable }

func (*netnsStart) sockets() (*netnsSockets, error) { return nil, errNetnsUnavailable }

func (*netnsStart) execResult(string) error { return nil }

func (*netnsStart) close() {}

func pickNetnsPorts([]uint16) (uint16, uint16) { return 0, 0 }

const netnsResolvConf = ""

func netnsAvailable() error { return errNetnsUnavailable }

func netnsID(int) string { return "" }

func killNamespace(string) {}
