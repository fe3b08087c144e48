package breakwater_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	bw "github.com/breakwater-go/breakwater"
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
	if n := tr.Bulkheads().InFlight(bw.HostKey(req)); n != 0 {
		t.Fatalf("the upgraded connection holds a concurrency slot (%d in flight)", n)
	}
}
