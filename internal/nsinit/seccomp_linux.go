package nsinit

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denyTerminalInjection installs a seccomp filter, inherited by the target
// and everything it starts, that refuses the ioctls which push input into a
// terminal (TIOCSTI) or drive the console (TIOCLINUX). The target shares the
// user's terminal; without this it could type commands that the user's shell
// runs after hermetic exits, outside the namespace. The capability checks
// for TIOCSTI are made in the host's user namespace, so no capability set
// of the target's stops it where the kernel still allows it
// (dev.tty.legacy_tiocsti=1).
//
// The init is still privileged in its user namespace (CAP_SYS_ADMIN), which
// seccomp accepts in place of no_new_privs; no_new_privs is not set, so the
// target's setuid programs behave as they would without hermetic.
func denyTerminalInjection() error {
	var native, compat, x32 uint32
	var nativeIoctl, compatIoctl uint32
	switch runtime.GOARCH {
	case "amd64":
		native, nativeIoctl = unix.AUDIT_ARCH_X86_64, unix.SYS_IOCTL
		compat, compatIoctl = unix.AUDIT_ARCH_I386, 54
		// x32 system calls share the x86-64 architecture tag with this
		// bit set in the number; none of them is let through.
		x32 = 0x40000000
	case "arm64":
		native, nativeIoctl = unix.AUDIT_ARCH_AARCH64, unix.SYS_IOCTL
		compat, compatIoctl = unix.AUDIT_ARCH_ARM, 54
		x32 = 0xffffffff
	default:
		return nil
	}
	const (
		offNr   = 0  // offsetof(struct seccomp_data, nr)
		offArch = 4  // offsetof(struct seccomp_data, arch)
		offArg1 = 24 // low 32 bits of args[1], the request (little-endian)
	)
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}
	}
	// Jump offsets count the instructions skipped; the indices are in the
	// comments: 11 allows, 12 refuses.
	prog := []unix.SockFilter{
		ld(offArch),       // 0
		jeq(native, 0, 3), // 1: native → 2, else → 5
		ld(offNr),         // 2
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32, Jt: 8, Jf: 0}, // 3: x32 → 12
		jeq(nativeIoctl, 3, 6),      // 4: ioctl → 8, else → 11
		jeq(compat, 0, 5),           // 5: compat → 6, else → 11
		ld(offNr),                   // 6
		jeq(compatIoctl, 0, 3),      // 7: ioctl → 8, else → 11
		ld(offArg1),                 // 8
		jeq(unix.TIOCSTI, 2, 0),     // 9: → 12
		jeq(unix.TIOCLINUX, 1, 0),   // 10: → 12
		ret(unix.SECCOMP_RET_ALLOW), // 11
		ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)), // 12
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC: every thread of the init gets the filter, whichever execs.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return errno
	}
	return nil
}
