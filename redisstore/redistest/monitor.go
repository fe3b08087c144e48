package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Command is one command a server ran, as MONITOR reports it.
type Command struct {
	// At is the server's clock when it ran the command. On one machine
	// that is the wall clock of every process on it.
	At time.Time
	// Script is true for a command that a Lua script called.
	Script bool
	// Args are the command's name and arguments, unquoted.
	Args []string
}

// Monitor records every command a server runs, with the server's own
// timestamps (Redis's MONITOR). It is safe for concurrent use.
type Monitor struct {
	addr string
	conn net.Conn
	done chan struct{}

	mu   sync.Mutex
	cmds []Command
	err  error
	seen map[string]chan struct{} // Sync markers waited for
}

// Monitor starts recording the commands s runs, until t ends.
func (s *Server) Monitor(t testing.TB) *Monitor {
	t.Helper()
	m, err := StartMonitor(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// StartMonitor starts recording the commands of the server at addr; the
// caller must Close it.
func StartMonitor(addr string) (*Monitor, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+OK") {
		conn.Close()
		return nil, fmt.Errorf("redistest: MONITOR answered %q: %v", strings.TrimSpace(line), err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	m := &Monitor{addr: addr, conn: conn, done: make(chan struct{}), seen: map[string]chan struct{}{}}
	go m.read(r)
	return m, nil
}

func (m *Monitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		c, err := parseMonitorLine(strings.TrimRight(line, "\r\n"))
		if err != nil {
			continue // not a command line
		}
		m.mu.Lock()
		m.cmds = append(m.cmds, c)
		if len(c.Args) == 2 && strings.EqualFold(c.Args[0], "echo") {
			if ch, ok := m.seen[c.Args[1]]; ok {
				close(ch)
				delete(m.seen, c.Args[1])
			}
		}
		m.mu.Unlock()
	}
}

var syncSeq struct {
	sync.Mutex
	n int
}

// Sync returns once the monitor has recorded every command the server ran
// before Sync was called: it sends a marker (ECHO) and waits to see it.
func (m *Monitor) Sync() error {
	syncSeq.Lock()
	syncSeq.n++
	marker := "redistest-sync-" + strconv.Itoa(syncSeq.n)
	syncSeq.Unlock()
	ch := make(chan struct{})
	m.mu.Lock()
	m.seen[marker] = ch
	m.mu.Unlock()
	if _, err := command(m.addr, "ECHO", marker); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-m.done:
		m.mu.Lock()
		defer m.mu.Unlock()
		return fmt.Errorf("redistest: monitor ended: %v", m.err)
	case <-time.After(10 * time.Second):
		return errors.New("redistest: the monitor did not see its marker within 10s")
	}
}

// Commands returns the commands recorded so far, in the order the server
// ran them, that match keep (nil keeps all).
func (m *Monitor) Commands(keep func(Command) bool) []Command {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Command
	for _, c := range m.cmds {
		if keep == nil || keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// Close stops recording and waits for the reading goroutine.
func (m *Monitor) Close() {
	m.conn.Close()
	<-m.done
}

// parseMonitorLine parses `+1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`.
func parseMonitorLine(line string) (Command, error) {
	line = strings.TrimPrefix(line, "+")
	ts, rest, ok := strings.Cut(line, " [")
	if !ok {
		return Command{}, errors.New("no source")
	}
	secs, usecs, ok := strings.Cut(ts, ".")
	if !ok {
		return Command{}, errors.New("no timestamp")
	}
	s, err1 := strconv.ParseInt(secs, 10, 64)
	us, err2 := strconv.ParseInt(usecs, 10, 64)
	if err1 != nil || err2 != nil {
		return Command{}, errors.New("bad timestamp")
	}
	src, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return Command{}, errors.New("no command")
	}
	_, client, _ := strings.Cut(src, " ")
	args, err := unquoteArgs(rest)
	if err != nil {
		return Command{}, err
	}
	return Command{At: time.Unix(s, us*1000), Script: client == "lua", Args: args}, nil
}

// unquoteArgs splits MONITOR's quoted arguments ("a" "b\"c" "\x00").
func unquoteArgs(s string) ([]string, error) {
	var args []string
	for s = strings.TrimLeft(s, " "); s != ""; s = strings.TrimLeft(s, " ") {
		if s[0] != '"' {
			return nil, errors.New("unquoted argument")
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return nil, errors.New("short escape")
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(s[i])
			}
		}
		if i >= len(s) {
			return nil, errors.New("unterminated argument")
		}
		args = append(args, b.String())
		s = s[i+1:]
	}
	return args, nil
}
