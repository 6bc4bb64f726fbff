//go:build linux

package redistest_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlane/lanes/redislane/redistest"
)

const orphanEnv = "REDISSERVER_ORPHAN"

func start(t *testing.T) *redistest.Server {
	t.Helper()
	s, err := redistest.Start()
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// alive reports whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s: redis-server %d still runs", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverPid returns the pid of the server on port, from INFO server.
func serverPid(t *testing.T, port int) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n') // $<length>
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil {
		t.Fatalf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO: %q", body)
	return 0
}

// The server runs in a process group of its own, and Kill kills it.
func TestKillEndsTheServer(t *testing.T) {
	s := start(t)
	pid := serverPid(t, s.Port)
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != pid {
		t.Errorf("redis-server %d runs in process group %d, not its own", pid, pgid)
	}
	s.Kill()
	waitGone(t, pid, "after Kill")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	pid = serverPid(t, s.Port)
	redistest.StopAll()
	waitGone(t, pid, "after StopAll")
}

// A process that dies without stopping its server (a test binary that
// timed out, or panicked past its clean-ups) takes the server with it.
func TestServerDiesWithItsProcess(t *testing.T) {
	if os.Getenv(orphanEnv) != "" {
		s, err := redistest.Start()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("port", s.Port)
		_, _ = io.Copy(io.Discard, os.Stdin) // until the parent has the server's pid
		os.Exit(1)                           // no Stop, no clean-up
	}
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithItsProcess$", "-test.timeout=30s")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var port int
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "port "); ok {
			port, _ = strconv.Atoi(v)
			break
		}
		if strings.HasPrefix(sc.Text(), "error") {
			t.Fatal(sc.Text())
		}
	}
	if port == 0 {
		t.Fatal("the child reported no server")
	}
	pid := serverPid(t, port)
	_ = in.Close()
	for sc.Scan() {
	}
	_ = cmd.Wait()
	waitGone(t, pid, "after its process exited")
}
