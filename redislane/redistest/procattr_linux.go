package redistest

import (
	"os"
	"runtime"
	"syscall"
)

// procAttr puts the server in a process group of its own and has the kernel
// kill it when the thread that started it (see lockThread) dies: when this
// process exits, however it exits.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lockThread keeps the calling goroutine on its thread for good, so that
// the thread lives as long as the server it starts.
func lockThread() { runtime.LockOSThread() }

// killGroup kills the server's process group, and the server itself in case
// the group could not be signalled.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
