package breakwater_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
)

// rawTransport is an http.Transport whose every connection is an in-memory
// pipe served by serve, which reads requests and writes whatever bytes it
// likes. Inside a synctest bubble its time is virtual.
func rawTransport(serve func(c net.Conn, br *bufio.Reader)) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, s := net.Pipe()
			go func() {
				defer s.Close()
				serve(s, bufio.NewReader(s))
			}()
			return c, nil
		},
	}
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, false
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err == nil
}
