//go:build !unix

package redisserver

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func lockThread() {}

func killGroup(p *os.Process) { _ = p.Kill() }
