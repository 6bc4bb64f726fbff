package localredis

import "syscall"

// sysProcAttr has the kernel kill redis-server when the thread that started
// it exits, so that a benchmark or test killed halfway leaves no server
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
