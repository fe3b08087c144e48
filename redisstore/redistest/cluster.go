package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// NewCluster starts a cluster of n masters for t, the 16384 hash slots
// split evenly, and stops it when t ends.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	need(t)
	c, err := StartCluster(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// StartCluster starts a cluster of n masters with their files in dir and
// waits until it reports cluster_state:ok.
func StartCluster(dir string, n int) (*Cluster, error) {
	c := &Cluster{}
	for i := range n {
		s, err := Start(dir, "--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", "2000")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		lo, hi := 16384*i/n, 16384*(i+1)/n-1
		if _, err := command(s.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			c.Stop()
			return nil, err
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(c.Nodes[0].Addr)
			if _, err := command(s.Addr, "CLUSTER", "MEET", host, port); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, s := range c.Nodes {
			info, err := command(s.Addr, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				ok = false
				break
			}
		}
		if ok {
			return c, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Stop()
	return nil, fmt.Errorf("redistest: cluster of %d did not reach cluster_state:ok", n)
}

// command sends one command and returns a simple or bulk string reply.
func command(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redistest: %s: %s", strings.Join(args, " "), line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		_, err = io.ReadFull(r, buf)
		return string(buf[:n]), err
	}
	return line, nil
}
