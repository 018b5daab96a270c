package launcher

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermetic-dev/hermetic/internal/nsinit"
)

// The network namespace (SPEC §5.1).
//
// Namespaces are created at process creation, with clone flags on the
// child: a Go program is multithreaded, and the kernel refuses
// unshare(CLONE_NEWUSER) to a multithreaded process. The child is hermetic
// itself, re-executed as the namespace's init (internal/nsinit, which acts
// during package initialisation, before main): inside the new namespaces,
// still holding the capabilities the new user namespace gives it, it
// brings loopback up, mounts a resolv.conf that names the DNS filter,
// creates the proxies' and the DNS filter's listening sockets on the
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

// netnsFailEnv, set to a non-empty value in hermetic's environment, makes
// creating the namespaces fail as if the kernel refused them. It exists so
// that tests can exercise --isolate=auto's fallback and --isolate=netns's
// error on a machine where namespaces work; it can only weaken isolation
// the way --isolate=none does, which whoever sets hermetic's environment
// can ask for anyway.
const netnsFailEnv = "HERMETIC_TEST_NETNS_UNAVAILABLE"

// NetnsInit is kept for programs written against the earlier API, which
// had to call it first thing in main. It does nothing now: the namespace's
// init runs during package initialisation (internal/nsinit, imported by this
// package), before main and before the heavier packages' initialisers, so
// every program that links the launcher can act as the init.
func NetnsInit() {}

// netnsSpec is what the init prepares inside the namespace.
type netnsSpec = nsinit.Spec

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
	cmd.Env = append(slices.Clone(cmd.Env), nsinit.Env+"="+spec.Encode())
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
	if err != nil && !errors.Is(err, io.EOF) {
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
	if msg != nsinit.MsgOK {
		closeFDs(fds)
		return nil, fmt.Errorf("setting up the network namespace: %s", strings.TrimPrefix(msg, nsinit.MsgError))
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

// execWait bounds how long hermetic waits to learn whether the init's exec
// of the target worked. The exec follows the sockets at once; should it
// hang (a file on a stalled network mount), the target is taken as started,
// and a failure still shows in the exit code, 126 or 127.
const execWait = 10 * time.Second

// execResult says whether the init's exec of the target failed: the error
// the exec returned, as os/exec would have reported it, or nil once the
// exec has closed the socket pair. Call it after sockets.
func (n *netnsStart) execResult(path string) error {
	buf := make([]byte, 128)
	n.conn.SetReadDeadline(time.Now().Add(execWait))
	nb, _, _, _, err := n.conn.ReadMsgUnix(buf, nil)
	if err != nil || nb == 0 {
		return nil
	}
	v, ok := strings.CutPrefix(string(buf[:nb]), nsinit.MsgExecError)
	errno, perr := strconv.Atoi(v)
	if !ok || perr != nil {
		return fmt.Errorf("starting the target in the network namespace: %q", buf[:nb])
	}
	return &fs.PathError{Op: "exec", Path: path, Err: syscall.Errno(errno)}
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

// netnsAvailable says, without creating anything, whether the namespaces
// can be expected to work; a clone that fails anyway (a seccomp filter in
// a container, say) is caught when the target starts.
func netnsAvailable() error {
	if os.Getenv(netnsFailEnv) != "" {
		return fmt.Errorf("%w (%s is set)", errNetnsUnavailable, netnsFailEnv)
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

// netnsID names the network namespace of process pid ("net:[INODE]").
func netnsID(pid int) string {
	id, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return ""
	}
	return id
}

// killNamespace kills every process left in the run's network namespace:
// what the target started in the background and left behind. Only this
// run's processes are in it, so nothing else is touched. Processes may
// fork while this runs, so it looks again, a bounded number of times.
func killNamespace(id string) {
	if id == "" || id == netnsID(os.Getpid()) {
		return
	}
	for range 50 {
		d, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		found := false
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 1 {
				continue
			}
			if netnsID(pid) == id {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
