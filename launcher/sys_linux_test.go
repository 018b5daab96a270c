package launcher

import "golang.org/x/sys/unix"

func fcntlClearCloexec(fd uintptr) (int, error) {
	return unix.FcntlInt(fd, unix.F_SETFD, 0)
}
