//go:build !unix

package redistest

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func lockThread() {}

func killGroup(p *os.Process) { _ = p.Kill() }
