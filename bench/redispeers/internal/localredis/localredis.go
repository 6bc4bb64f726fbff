// Package localredis starts a throwaway redis-server on a free loopback
// port, with persistence off, for lockbench and its tests.
//
// The lanes module has its own starter (redislane/internal/redisserver); an
// internal package cannot be imported from this module, so this is a second,
// smaller one.
package localredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ErrNotInstalled is returned by Start when no redis-server binary is found.
var ErrNotInstalled = errors.New("localredis: redis-server not found in PATH (on Debian: apt-get install redis-server)")

// Server is a running redis-server.
type Server struct {
	Addr string // 127.0.0.1:<port>
	dir  string
	cmd  *exec.Cmd
	exit chan struct{} // closed when the process has exited
}

// Start starts redis-server on a free loopback port with persistence off
// and returns once it answers PING, or after 10 s with an error. The
// caller must Stop it; on Linux it is also killed if the caller dies.
func Start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "lockbench-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // the free port may be taken between probe and bind
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		if lastErr = s.start(bin, port); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(bin string, port int) error {
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--maxmemory-policy", "noeviction",
		"--loglevel", "warning",
	)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localredis: start %s: %w", bin, err)
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exit) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exit:
			return fmt.Errorf("localredis: redis-server exited at start (port %d taken?)", port)
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling a process that cannot tell us it is up
	}
	s.kill()
	return fmt.Errorf("localredis: redis-server on %s did not answer PING within 10s", s.Addr)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("localredis: PING answered %q", line)
	}
	return nil
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// Stop kills the server (SIGKILL: there is nothing to save), waits for it
// and removes its directory. It may be called more than once.
func (s *Server) Stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}
