package nsinit

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	v, ok := syscall.Getenv(Env)
	if !ok {
		return
	}
	os.Exit(run(v))
}

// sock is the init's end of the socket pair to the launcher.
const sock = 3

// run runs in the child, inside the new namespaces, and returns an exit
// code only when it cannot exec the target.
func run(v string) int {
	// Capabilities are per thread: set up and exec from one thread. (Package
	// initialisation runs on the main thread already; this keeps it there.)
	runtime.LockOSThread()
	if err := startedByLauncher(); err != nil {
		// Not an init: someone set Env in an ordinary run. Doing nothing
		// is safer than remounting this process's resolv.conf.
		os.Stderr.WriteString("hermetic: " + Env + " is set, but this process is not a namespace init started by hermetic (" + err.Error() + "); unset it\n")
		return ExitSetup
	}
	fail := func(err error) int {
		unix.Sendmsg(sock, []byte(MsgError+err.Error()), nil, nil, 0)
		return ExitSetup
	}
	spec, err := Decode(v)
	if err != nil {
		return fail(err)
	}
	if len(os.Args) < 3 {
		return fail(errors.New("no target"))
	}
	if err := loopbackUp(); err != nil {
		return fail(errors.New("bringing up loopback: " + err.Error()))
	}
	if err := mountResolvConf(spec.ResolvConf); err != nil {
		return fail(errors.New("mounting resolv.conf: " + err.Error()))
	}
	var fds []int
	add := func(typ int, port uint16) error {
		fd, err := bindLoopback(typ, port)
		if err != nil {
			return errors.New("binding 127.0.0.1:" + strconv.Itoa(int(port)) + " in the namespace: " + err.Error())
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
	if err := unix.Sendmsg(sock, []byte(MsgOK), unix.UnixRights(fds...), nil, 0); err != nil {
		return ExitSetup
	}
	for _, fd := range fds {
		unix.Close(fd)
	}

	// The target gets its standard streams and nothing else: every other
	// descriptor, the socket pair included, closes at exec.
	CloseInheritedFDs()
	if err := denyTerminalInjection(); err != nil {
		// A kernel without seccomp filters: the namespace still holds the
		// network; say what is missing.
		os.Stderr.WriteString("hermetic: warning: cannot refuse terminal input injection (seccomp: " + err.Error() + ")\n")
	}
	if err := dropInheritableCaps(); err != nil {
		os.Stderr.WriteString("hermetic: dropping capabilities: " + err.Error() + "\n")
		return ExitSetup
	}
	env := os.Environ()
	for i := 0; i < len(env); {
		if strings.HasPrefix(env[i], Env+"=") {
			env = append(env[:i], env[i+1:]...)
			continue
		}
		i++
	}
	path := os.Args[1]
	err = syscall.Exec(path, os.Args[2:], env)
	// The launcher words the failure as it would have without the
	// namespace (and maps it to 126 or 127); the exit code says the same
	// if it is no longer listening.
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EINVAL
	}
	if unix.Sendmsg(sock, []byte(MsgExecError+strconv.Itoa(int(errno))), nil, nil, 0) != nil {
		os.Stderr.WriteString("hermetic: " + os.Args[2] + ": " + err.Error() + "\n")
	}
	if errno == syscall.ENOENT {
		return 127
	}
	return 126
}

// startedByLauncher checks that descriptor 3 is the launcher's end of the
// socket pair: a Unix SOCK_SEQPACKET socket whose peer is this process's
// parent. Only then does the process act as the init.
func startedByLauncher() error {
	typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return errors.New("descriptor 3 is not a socket")
	}
	if typ != unix.SOCK_SEQPACKET {
		return errors.New("descriptor 3 is not the launcher's socket pair")
	}
	cred, err := unix.GetsockoptUcred(sock, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(cred.Pid) != os.Getppid() {
		return errors.New("descriptor 3 does not lead to the parent process")
	}
	return nil
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
		return errors.New("making mounts private: " + err.Error())
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

// CloseInheritedFDs marks every descriptor above stderr close-on-exec, so
// that an exec passes on only the three standard streams, whatever this
// process itself inherited from its parent.
func CloseInheritedFDs() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Kernels before 5.11: walk the descriptor table.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
