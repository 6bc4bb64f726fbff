//go:build unix && !linux

package redistest

import (
	"os"
	"syscall"
)

// procAttr puts the server in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func lockThread() {}

// killGroup kills the server's process group, and the server itself in case
// the group could not be signalled.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
