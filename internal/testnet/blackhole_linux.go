package testnet

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// Blackhole returns the port of a loopback listener whose accept queue is
// full and never drained: Linux drops further SYNs, so a connection to it
// neither succeeds nor fails until the dialer gives up.
func Blackhole(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	// Fill the queue. The kernel lets backlog+1 connections complete; the
	// fillers that do stay open, and the first that cannot connect shows
	// the queue is full.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
		if i == 16 {
			t.Skip("cannot fill a listen queue here; no black hole for the test")
		}
	}
	return port
}
