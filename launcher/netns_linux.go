package launcher

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The network namespace (SPEC §5.1).
//
// Namespaces are created at process creation, with clone flags on the
// child: a Go program is multithreaded, and the kernel refuses
// unshare(CLONE_NEWUSER) to a multithreaded process. The child is hermetic
// itself, re-executed in an init mode that NetnsInit recognises: inside the
// new namespaces, still holding the capabilities the new user namespace
// gives it, it brings loopback up, mounts a resolv.conf that names the DNS
// filter, creates the proxies' and the DNS filter's listening sockets on the
// namespace's loopback, sends them to hermetic over a socket pair, and
// execs the target. The capabilities end at that exec (the target keeps the
// user's uid, which is not 0 in the namespace, so it gets none back). One
// process, no forwarder: hermetic serves the sockets from the host's
// network, so the proxies are the target's only way out.
//
// A user namespace is created for root too: root in a new network namespace
// but in the host's user namespace could join the host's network namespace
// again (setns on /proc/1/ns/net needs CAP_SYS_ADMIN over the namespace's
// owner, which host root has). Root is mapped to itself, with the whole uid
// and gid range, so that root keeps reading every file it could.

// netnsEnv carries the init's instructions; its presence selects init mode.
// The init removes it before the target's exec.
const netnsEnv = "HERMETIC_NETNS_INIT"

// netnsFailEnv, set to a non-empty value in hermetic's environment, makes
// creating the namespaces fail as if the kernel refused them. It exists so
// that tests can exercise --isolate=auto's fallback and --isolate=netns's
// error on a machine where namespaces work; it can only weaken isolation
// the way --isolate=none does, which whoever sets hermetic's environment
// can ask for anyway.
const netnsFailEnv = "HERMETIC_TEST_NETNS_UNAVAILABLE"

// netnsInitHooked records that this program called NetnsInit, and so will
// act as the init when re-executed. A program embedding the launcher that
// did not cannot use the namespace: its re-execution would run its own main
// with the target's arguments.
var netnsInitHooked atomic.Bool

// NetnsInit must be called first thing in main by every program that runs
// targets through the launcher (cmd/hermetic does). In a normal start it
// returns at once. When the program was started as the namespace's init,
// it prepares the namespace and execs the target, and never returns.
func NetnsInit() {
	v, ok := os.LookupEnv(netnsEnv)
	if !ok {
		netnsInitHooked.Store(true)
		return
	}
	os.Exit(netnsInit(v))
}

// netnsSpec is what the init prepares inside the namespace. Ports are on
// 127.0.0.1; the namespace is new, so they are all free.
type netnsSpec struct {
	HTTPPort, SOCKSPort uint16
	// Expose are host loopback ports brought in: a listener on each, whose
	// connections hermetic relays to the host's 127.0.0.1:PORT.
	Expose []uint16
	// ResolvConf is a file bind-mounted over /etc/resolv.conf.
	ResolvConf string
}

func (s netnsSpec) encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d,%d,", s.HTTPPort, s.SOCKSPort)
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

func decodeNetnsSpec(v string) (netnsSpec, error) {
	parts := strings.SplitN(v, ",", 4)
	if len(parts) != 4 {
		return netnsSpec{}, errors.New("malformed namespace instructions")
	}
	var s netnsSpec
	port := func(p string) (uint16, error) {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("bad port %q", p)
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

// pickNetnsPorts chooses the proxies' ports inside the namespace: random,
// so that a target that binds fixed ports of its own (a test suite running
// its own proxy on 3128 or 1080) does not meet them, and distinct from the
// exposed ports and from 53.
func pickNetnsPorts(expose []uint16) (http, socks uint16) {
	taken := func(p uint16) bool { return p == 53 || slices.Contains(expose, p) }
	for {
		http = uint16(20000 + rand.IntN(30000))
		socks = uint16(20000 + rand.IntN(30000))
		if http != socks && !taken(http) && !taken(socks) {
			return http, socks
		}
	}
}

// netnsSockets are the listening sockets the init created in the
// namespace, now held by hermetic.
type netnsSockets struct {
	HTTP, SOCKS net.Listener
	DNSUDP      net.PacketConn
	DNSTCP      net.Listener
	Expose      []net.Listener // in the order of netnsSpec.Expose
}

func (s *netnsSockets) Close() {
	for _, c := range []io.Closer{s.HTTP, s.SOCKS, s.DNSUDP, s.DNSTCP} {
		if c != nil {
			c.Close()
		}
	}
	for _, l := range s.Expose {
		if l != nil {
			l.Close()
		}
	}
}

// netnsStart is a target being started in the namespace: hermetic's end of
// the socket pair the init reports on.
type netnsStart struct {
	conn  *net.UnixConn
	child *os.File // the init's end, until Start has handed it over
	spec  netnsSpec
}

// errNetnsUnavailable is returned when the kernel (or the test knob)
// refuses the namespaces.
var errNetnsUnavailable = errors.New("user and network namespaces are not available")

// netnsCommand rewrites cmd, already filled in for the target (Path, Args,
// Env, Dir, streams), to start the target through the init in new user,
// network and mount namespaces. Call sockets after cmd.Start, and close
// in every case.
func netnsCommand(cmd *exec.Cmd, spec netnsSpec) (*netnsStart, error) {
	if !netnsInitHooked.Load() {
		return nil, errors.New("this program does not call launcher.NetnsInit at the start of main, so it cannot act as the namespace's init")
	}
	if os.Getenv(netnsFailEnv) != "" {
		return nil, fmt.Errorf("%w (%s is set)", errNetnsUnavailable, netnsFailEnv)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	parent := os.NewFile(uintptr(fds[0]), "hermetic-netns")
	child := os.NewFile(uintptr(fds[1]), "hermetic-netns-init")
	fc, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		child.Close()
		return nil, err
	}
	n := &netnsStart{conn: fc.(*net.UnixConn), child: child, spec: spec}

	target := cmd.Path
	cmd.Path = exe
	cmd.Args = append([]string{"hermetic-netns-init", target}, cmd.Args...)
	cmd.Env = append(slices.Clone(cmd.Env), netnsEnv+"="+spec.encode())
	// The socket pair is the init's descriptor 3; the init closes it at
	// the target's exec.
	cmd.ExtraFiles = []*os.File{child}
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Cloneflags |= unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		const all = 1<<32 - 1
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: all}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: all}}
	} else {
		// An unprivileged user may map only its own ids, and must give
		// up setgroups to map its gid.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// A uid other than 0 loses every capability at exec, and the init
		// is an exec of hermetic: carry the three it needs across that one
		// exec as ambient capabilities. The init clears them before the
		// target's exec.
		attr.AmbientCaps = []uintptr{unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN, unix.CAP_NET_BIND_SERVICE}
	}
	cmd.SysProcAttr = attr
	return n, nil
}

// netnsInitTimeout bounds how long hermetic waits for the init to report.
const netnsInitTimeout = 10 * time.Second

// sockets receives the init's report: the listening sockets, or the error
// that stopped it. The caller has started cmd.
func (n *netnsStart) sockets() (*netnsSockets, error) {
	// The child's end was handed over at Start; closing hermetic's copy
	// lets a dying init show as end of file.
	n.child.Close()
	buf := make([]byte, 4096)
	want := 4 + len(n.spec.Expose)
	oob := make([]byte, unix.CmsgSpace(4*want))
	n.conn.SetReadDeadline(time.Now().Add(netnsInitTimeout))
	nb, noob, _, _, err := n.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("setting up the network namespace: %w", err)
	}
	var fds []int
	if noob > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:noob])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			fds = append(fds, got...)
		}
	}
	msg := string(buf[:nb])
	if nb == 0 {
		closeFDs(fds)
		return nil, errors.New("setting up the network namespace: the init exited without a word")
	}
	if msg != "ok" {
		closeFDs(fds)
		return nil, fmt.Errorf("setting up the network namespace: %s", strings.TrimPrefix(msg, "error: "))
	}
	if len(fds) != want {
		closeFDs(fds)
		return nil, fmt.Errorf("setting up the network namespace: got %d sockets, want %d", len(fds), want)
	}
	s := &netnsSockets{}
	var errs []error
	listener := func(fd int) net.Listener {
		f := os.NewFile(uintptr(fd), "netns-listener")
		defer f.Close()
		l, err := net.FileListener(f)
		errs = append(errs, err)
		return l
	}
	s.HTTP = listener(fds[0])
	s.SOCKS = listener(fds[1])
	f := os.NewFile(uintptr(fds[2]), "netns-dns-udp")
	s.DNSUDP, err = net.FilePacketConn(f)
	f.Close()
	errs = append(errs, err)
	s.DNSTCP = listener(fds[3])
	for _, fd := range fds[4:] {
		s.Expose = append(s.Expose, listener(fd))
	}
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (n *netnsStart) close() {
	if n != nil {
		n.conn.Close()
		n.child.Close()
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// netnsResolvConf is the resolv.conf the namespace sees: the DNS filter
// and nothing else. No search list: a name is looked up as given, and
// the filter decides exactly that name.
const netnsResolvConf = "# hermetic: the DNS filter, the only resolver in this network namespace\nnameserver 127.0.0.1\noptions edns0\n"

// netnsInit runs in the child, inside the new namespaces, and returns an
// exit code only when it cannot exec the target.
func netnsInit(v string) int {
	// Capabilities are per thread: set up and exec from one thread.
	runtime.LockOSThread()
	const sock = 3
	fail := func(err error) int {
		unix.Sendmsg(sock, []byte("error: "+err.Error()), nil, nil, 0)
		return 125
	}
	spec, err := decodeNetnsSpec(v)
	if err != nil {
		return fail(err)
	}
	if len(os.Args) < 3 {
		return fail(errors.New("no target"))
	}
	if err := loopbackUp(); err != nil {
		return fail(fmt.Errorf("bringing up loopback: %w", err))
	}
	if err := mountResolvConf(spec.ResolvConf); err != nil {
		return fail(fmt.Errorf("mounting resolv.conf: %w", err))
	}
	var fds []int
	add := func(typ int, port uint16) error {
		fd, err := bindLoopback(typ, port)
		if err != nil {
			return fmt.Errorf("binding 127.0.0.1:%d in the namespace: %w", port, err)
		}
		fds = append(fds, fd)
		return nil
	}
	errs := []error{
		add(unix.SOCK_STREAM, spec.HTTPPort),
		add(unix.SOCK_STREAM, spec.SOCKSPort),
		add(unix.SOCK_DGRAM, 53),
		add(unix.SOCK_STREAM, 53),
	}
	for _, p := range spec.Expose {
		errs = append(errs, add(unix.SOCK_STREAM, p))
	}
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	if err := unix.Sendmsg(sock, []byte("ok"), unix.UnixRights(fds...), nil, 0); err != nil {
		return 125
	}
	closeFDs(fds)

	// The target gets its standard streams and nothing else: every other
	// descriptor, the socket pair included, closes at exec.
	closeInheritedFDs()
	if err := dropInheritableCaps(); err != nil {
		fmt.Fprintf(os.Stderr, "hermetic: dropping capabilities: %v\n", err)
		return 125
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, netnsEnv+"=") })
	path := os.Args[1]
	err = syscall.Exec(path, os.Args[2:], env)
	fmt.Fprintf(os.Stderr, "hermetic: %s: %v\n", os.Args[2], err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// loopbackUp sets IFF_UP on lo with an ioctl: no external tool, which could
// not run with the namespace's capabilities anyway.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// mountResolvConf makes the mount tree private, so that nothing mounted
// here reaches the host, and binds file over /etc/resolv.conf. A symlinked
// /etc/resolv.conf is followed: the mount covers the file it names, in
// this mount namespace only. Without any /etc/resolv.conf the C library,
// Go and musl all default to 127.0.0.1, the filter, so nothing is mounted.
func mountResolvConf(file string) error {
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	const target = "/etc/resolv.conf"
	if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return unix.Mount(file, target, "", unix.MS_BIND, "")
}

// bindLoopback creates a listening TCP or a bound UDP socket on
// 127.0.0.1:port.
func bindLoopback(typ int, port uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if typ == unix.SOCK_STREAM {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// dropInheritableCaps empties the ambient and inheritable sets. Only
// ambient capabilities survive the exec of an ordinary program by a uid
// other than 0, and inheritable ones would pass to a program carrying
// file capabilities: with both empty the target gets none (root in the
// namespace keeps root's, which reach no further than its namespaces).
func dropInheritableCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// netnsAvailable says, without creating anything, whether the namespaces
// can be expected to work; a clone that fails anyway (a seccomp filter in
// a container, say) is caught when the target starts.
func netnsAvailable() error {
	if os.Getenv(netnsFailEnv) != "" {
		return fmt.Errorf("%w (%s is set)", errNetnsUnavailable, netnsFailEnv)
	}
	if !netnsInitHooked.Load() {
		return errors.New("this program does not call launcher.NetnsInit at the start of main, so it cannot act as the namespace's init")
	}
	sysctl := func(name string) string {
		b, err := os.ReadFile("/proc/sys/" + name)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if sysctl("user/max_user_namespaces") == "0" {
		return fmt.Errorf("%w: user.max_user_namespaces is 0", errNetnsUnavailable)
	}
	if os.Getuid() != 0 {
		if sysctl("kernel/unprivileged_userns_clone") == "0" {
			return fmt.Errorf("%w: kernel.unprivileged_userns_clone is 0", errNetnsUnavailable)
		}
		if sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" {
			return fmt.Errorf("%w: AppArmor restricts unprivileged user namespaces", errNetnsUnavailable)
		}
	}
	return nil
}
