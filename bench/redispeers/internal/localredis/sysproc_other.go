//go:build !linux

package localredis

import "syscall"

// sysProcAttr: without Pdeathsig, only Stop ends the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }
