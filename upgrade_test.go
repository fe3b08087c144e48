package breakwater_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	bw "github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/breakwatertest"
)

// A protocol upgrade (101 Switching Protocols) comes back with a writable
// body, as WebSocket clients and httputil.ReverseProxy need, and no timeout
// of ours bounds the upgraded connection.
func TestUpgradeKeepsTheConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString(line)
		rw.Flush()
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := newTransport(t, base, bw.WithAttemptTimeout(50*time.Millisecond), bw.WithConcurrencyLimit(1))

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		t.Fatalf("status %d, body %T: want 101 with a writable body", resp.StatusCode, resp.Body)
	}
	defer conn.Close()
	time.Sleep(100 * time.Millisecond) // past the attempt timeout: the connection must live on
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || got != "ping\n" {
		t.Fatalf("echo %q, %v", got, err)
	}
	if n := slotsHeld(tr, bw.HostKey(req)); n != 0 {
		t.Fatalf("the upgraded connection holds a concurrency slot (%d in flight)", n)
	}
}

// An unsolicited 101 Switching Protocols, to a request that did not ask to
// upgrade, is a broken exchange: the call ends with an error at once,
// releasing its concurrency slot, instead of handing back a connection
// whose body read never ends.
func TestUnsolicitedSwitchingProtocols(t *testing.T) {
	for _, hdr := range []string{"Connection: Upgrade\r\nUpgrade: h2c\r\n", ""} {
		t.Run(fmt.Sprintf("header=%q", hdr), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := rawTransport(func(c net.Conn, br *bufio.Reader) {
					if _, ok := readRequest(br); !ok {
						return
					}
					io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n"+hdr+"\r\n")
					io.Copy(io.Discard, c) // hold the connection until the client lets go
				})
				defer base.CloseIdleConnections()
				tr := newTransport(t, base, bw.WithMaxAttempts(1), bw.WithCallTimeout(2*time.Second),
					bw.WithAttemptTimeout(time.Second), bw.WithConcurrencyLimit(1))
				req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if err == nil {
					_, rerr := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					t.Fatalf("a 101 to a plain GET came back as a response (%d), body read %v after %s", resp.StatusCode, rerr, time.Since(start))
				}
				if d := time.Since(start); d > 0 {
					t.Errorf("the call took %s; a 101 nobody asked for ends it at once", d)
				}
				if n := slotsHeld(tr, "http://upstream.test"); n != 0 {
					t.Errorf("%d concurrency slots held after the call", n)
				}
			})
		})
	}
}

// Only a request that names the protocol to switch to (an Upgrade field)
// escapes the timeouts; "Connection: Upgrade" alone does not.
func TestConnectionUpgradeAloneKeepsTheTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := breakwatertest.NewPipeUpstream(t, breakwatertest.Step{Hang: true})
		tr := newTransport(t, u.Transport(), bw.WithAttemptTimeout(time.Second), bw.WithMaxAttempts(1))
		req, _ := http.NewRequest(http.MethodGet, breakwatertest.PipeURL+"/", nil)
		req.Header.Set("Connection", "Upgrade")
		start := time.Now()
		if r := do(tr, req); !errors.Is(r.err, bw.ErrAttemptTimeout) || time.Since(start) != time.Second {
			t.Fatalf("%+v after %s, want ErrAttemptTimeout after 1s", r, time.Since(start))
		}
	})
}
