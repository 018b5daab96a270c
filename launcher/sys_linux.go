package launcher

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr makes the kernel kill the target with SIGKILL if hermetic
// dies, so a killed hermetic never leaves an unfiltered target behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// closeInheritedFDs marks every descriptor above stderr close-on-exec, so
// the target inherits only its three standard streams, whatever hermetic
// itself inherited from its parent.
func closeInheritedFDs() {
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
		fd := 0
		for _, c := range n {
			fd = fd*10 + int(c-'0')
		}
		if fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// terminalSentSIGINT reports whether hermetic is in the foreground process
// group of its terminal. Then a SIGINT most likely came from the terminal,
// which sent it to the target (in the same group) as well, and forwarding it
// would deliver it twice.
func terminalSentSIGINT() bool {
	for _, fd := range []int{0, 2, 1} {
		pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		if err == nil {
			return pgrp == unix.Getpgrp()
		}
	}
	return false
}
