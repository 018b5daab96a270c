package launcher

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hermetic-dev/hermetic/internal/nsinit"
)

// sysProcAttr makes the kernel kill the target with SIGKILL if hermetic
// dies, so a killed hermetic never leaves an unfiltered target behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// closeInheritedFDs marks every descriptor above stderr close-on-exec, so
// the target inherits only its three standard streams, whatever hermetic
// itself inherited from its parent.
func closeInheritedFDs() { nsinit.CloseInheritedFDs() }

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
