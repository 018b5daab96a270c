//go:build !linux

package launcher

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

func closeInheritedFDs() {}

func terminalSentSIGINT() bool { return false }
