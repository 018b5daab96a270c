// Package nsinit is the network namespace's init (SPEC §5.1): hermetic
// re-executed inside new user, network and mount namespaces, which prepares
// the namespace and execs the target.
//
// It is a package of its own, with no dependency beyond the standard
// library's lowest layers and golang.org/x/sys/unix, so that its init
// function runs before the heavy package initialisers of the program (the
// proxies' TLS and HTTP stacks, the DNS library): the init does its work
// there and execs the target, and never pays for them. Go initialises
// packages in dependency order and otherwise by import path, so this one
// comes as soon as its few dependencies are ready. The launcher imports it,
// so every program that runs targets through the launcher can act as the
// init.
package nsinit

import (
	"errors"
	"strconv"
	"strings"
)

// Env carries the init's instructions; its presence selects init mode. The
// init removes it before the target's exec.
const Env = "HERMETIC_NETNS_INIT"

// Spec is what the init prepares inside the namespace. Ports are on
// 127.0.0.1; the namespace is new, so they are all free.
type Spec struct {
	HTTPPort, SOCKSPort uint16
	// Expose are host loopback ports brought in: a listener on each, whose
	// connections the launcher relays to the host's 127.0.0.1:PORT.
	Expose []uint16
	// ResolvConf is a file bind-mounted over /etc/resolv.conf.
	ResolvConf string
}

// Encode is the value of Env for s.
func (s Spec) Encode() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(s.HTTPPort)))
	b.WriteByte(',')
	b.WriteString(strconv.Itoa(int(s.SOCKSPort)))
	b.WriteByte(',')
	for i, p := range s.Expose {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(int(p)))
	}
	b.WriteByte(',')
	b.WriteString(s.ResolvConf)
	return b.String()
}

// Decode reads a value made by Encode.
func Decode(v string) (Spec, error) {
	parts := strings.SplitN(v, ",", 4)
	if len(parts) != 4 {
		return Spec{}, errors.New("malformed namespace instructions")
	}
	var s Spec
	port := func(p string) (uint16, error) {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, errors.New("bad port " + strconv.Quote(p))
		}
		return uint16(n), nil
	}
	var err error
	if s.HTTPPort, err = port(parts[0]); err != nil {
		return s, err
	}
	if s.SOCKSPort, err = port(parts[1]); err != nil {
		return s, err
	}
	if parts[2] != "" {
		for _, p := range strings.Split(parts[2], ":") {
			n, err := port(p)
			if err != nil {
				return s, err
			}
			s.Expose = append(s.Expose, n)
		}
	}
	s.ResolvConf = parts[3]
	return s, nil
}

// The init's reports on the socket pair (its descriptor 3), in order:
// either MsgError+reason, or MsgOK with the listening sockets, then, only
// if the target's exec fails, MsgExecError+errno. A successful exec closes
// the socket pair (close-on-exec), which the launcher reads as end of file.
const (
	MsgOK        = "ok"
	MsgError     = "error: "
	MsgExecError = "exec-error: "
)

// ExitSetup is the init's exit code when the namespace could not be set
// up; the launcher reports the reason it sent.
const ExitSetup = 125
