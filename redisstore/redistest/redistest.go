// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and stops them: standalone servers that a test can kill
// and restart by their PID, and small Redis Clusters. A [Monitor] records
// what a server runs, timed by the server's own clock.
//
// redis-server must be on PATH (on Debian, the redis-server package;
// scripts/deps.sh in breakwater's repository installs it). Without it,
// [New] and [NewCluster] skip the test, or fail it when the environment
// variable CI is set.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	// Addr is host:port on the loopback interface.
	Addr string
	port int
	args []string
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Available reports whether redis-server is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// need skips or fails t when redis-server is missing.
func need(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	const msg = "redis-server not on PATH (scripts/deps.sh installs it)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// New starts a standalone server for t and stops it when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	need(t)
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start starts a standalone server with its files in dir (which must
// exist), and waits until it answers.
func Start(dir string, extra ...string) (*Server, error) {
	var err error
	for range 5 { // a free port can be taken between the probe and the bind
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		}, extra...)
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
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
	cmd := exec.Command("redis-server", s.args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redistest: redis-server exited at start: %v", err)
		default:
		}
		if ping(s.Addr) == nil {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return errors.New("redistest: redis-server did not answer within 10s")
}

// ping sends PING and expects PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redistest: PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// PID returns the process id of the running server (0 when stopped).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill kills the server with SIGKILL, by the PID this package started, and
// waits until its port refuses connections.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if ping(s.Addr) != nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("redistest: redis-server still answers after SIGKILL")
}

// Restart starts the server again on the same port (after [Server.Kill]),
// empty, and waits until it answers.
func (s *Server) Restart() error {
	var err error
	for range 50 { // the port may linger for a moment
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Stop kills the server if it runs.
func (s *Server) Stop() { _ = s.Kill() }
