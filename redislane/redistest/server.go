// Package redistest starts and stops a throwaway redis-server on a free
// loopback port, with persistence off (or a Redis Cluster of them, see
// StartCluster, whose slots it can move), for redislane's tests, fleetsim and
// the benchmarks of bench/redispeers. It is a public package, not an
// internal one, so that the nested bench module can import it; it is test
// plumbing, not part of redislane's API.
//
// A server never outlives the process that started it by much: it runs in
// a process group of its own, which Kill, Stop and StopAll kill as a whole,
// and on Linux it also gets SIGKILL when the starting process dies, so that
// a test binary that panics or times out (and so runs no clean-up) leaves no
// redis-server behind.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// running holds the servers started and not yet killed, for StopAll.
var running struct {
	sync.Mutex
	m map[*Server]bool
}

// StopAll stops every server of this process that is still running. A
// TestMain calls it after the tests, so that a test that failed before its
// clean-up leaves no server behind.
func StopAll() {
	running.Lock()
	ss := make([]*Server, 0, len(running.m))
	for s := range running.m {
		ss = append(ss, s)
	}
	running.Unlock()
	for _, s := range ss {
		s.Stop()
	}
}

// ErrNotInstalled is returned by Start when no redis-server binary is found.
var ErrNotInstalled = errors.New("redistest: redis-server not found in PATH (on Debian: apt-get install redis-server)")

// Server is a running redis-server.
type Server struct {
	Addr string // 127.0.0.1:<port>
	Port int    // the port of Addr
	bin  string
	dir  string
	args []string // more arguments of redis-server (a cluster node's)
	cmd  *exec.Cmd
	exit chan struct{}
}

// Start starts redis-server on a free loopback port with persistence off
// (no snapshots, no append-only file), and returns once it answers PING.
func Start() (*Server, error) { return start() }

// start starts a server as Start does, with args added to its command line.
func start(args ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "redislane-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // the free port may be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, bin: bin, dir: dir, args: args}
		if lastErr = s.start(); lastErr == nil {
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

func (s *Server) start() error {
	cmd := exec.Command(s.bin, append([]string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--maxmemory-policy", "noeviction",
		"--loglevel", "warning",
	}, s.args...)...)
	cmd.Stdout = nil
	cmd.Stderr = nil
	cmd.SysProcAttr = procAttr()
	s.exit = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The thread that starts the server stays locked until it exits: on
		// Linux the server's parent-death signal fires when that thread
		// ends, which must not happen while the server runs. The thread is
		// dropped after the server exited (no UnlockOSThread).
		lockThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.exit)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	s.cmd = cmd
	running.Lock()
	if running.m == nil {
		running.m = make(map[*Server]bool)
	}
	running.m[s] = true
	running.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exit:
			s.Kill() // only forgets it: it is gone
			return fmt.Errorf("redistest: redis-server exited at start (port %d taken?)", s.Port)
		default:
		}
		if ping(s.Addr) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling a process we cannot be told about
	}
	s.Kill()
	return fmt.Errorf("redistest: redis-server on %s did not answer PING within 10s", s.Addr)
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
		return fmt.Errorf("redistest: PING answered %q", line)
	}
	return nil
}

// Kill stops the server with SIGKILL (its whole process group), losing its
// state, and waits for it. A Server is used by one goroutine at a time.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exit: // reaped: its pid may belong to another process by now
	default:
		killGroup(s.cmd.Process)
		<-s.exit
	}
	s.cmd = nil
	running.Lock()
	delete(running.m, s)
	running.Unlock()
}

// Restart kills the server (kill -9: nothing is saved at exit) and starts
// a new one on the same port and directory: it is empty, or holds what the
// last SAVE wrote there, which it loads.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	for range 50 { // the port can linger briefly after the kill
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}
