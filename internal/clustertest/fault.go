package clustertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Kill sends SIGKILL to node i (an index into Seeds) and returns once its
// port refuses connections: the node dies as in a crash, saving nothing
// and telling no one. The cluster notices after its node timeout.
func (c *Cluster) Kill(tb testing.TB, i int) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(c.nodeDir(i), "redis.pid"))
	if err != nil {
		tb.Fatalf("node %d: %v", i, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatalf("node %d: pid file %q: %v", i, b, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		tb.Fatalf("kill node %d (pid %d): %v", i, pid, err)
	}
	// The node is not this process's child: it may stay a zombie until
	// its parent reaps it, but its sockets close when it dies.
	for deadline := time.Now().Add(20 * time.Second); ; { // bounds a broken run; times nothing
		cn, err := net.Dial("tcp", c.Seeds[i])
		if err != nil {
			return
		}
		_ = cn.Close()
		if time.Now().After(deadline) {
			tb.Fatalf("node %d (%s) still accepts connections after SIGKILL", i, c.Seeds[i])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the given nodes (indexes into Seeds; every node when
// none is given) again on their old ports, with the cluster configuration
// they saved, and waits as Start does until every node sees the whole
// cluster in state ok and every replica has synced. Nodes still running
// are left alone. Nodes keep no data on disk, so a restarted master comes
// back empty; a master that was failed over comes back as a replica of
// its successor.
func (c *Cluster) Restart(tb testing.TB, nodes ...int) {
	tb.Helper()
	args := []string{"restart", c.dir}
	for _, i := range nodes {
		args = append(args, strconv.Itoa(i+1))
	}
	var out, errb strings.Builder
	cmd := exec.Command(c.script, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s restart: %v\n%s", c.script, err, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(c.Seeds, ",") {
		tb.Fatalf("restart printed seeds %q, want %q", got, strings.Join(c.Seeds, ","))
	}
}

// nodeDir returns the directory of node i (an index into Seeds).
func (c *Cluster) nodeDir(i int) string {
	return filepath.Join(c.dir, "node"+strconv.Itoa(i+1))
}

// MasterOf returns the index into Seeds of the master serving key's hash
// slot, as the first node that answers sees it (CLUSTER KEYSLOT, then the
// slot ranges of CLUSTER NODES). After a failover nodes may disagree for a
// moment; the caller waits for the answer it needs.
func (c *Cluster) MasterOf(tb testing.TB, key string) int {
	tb.Helper()
	i, err := c.Owner(key)
	if err != nil {
		tb.Fatal(err)
	}
	return i
}

// Owner is MasterOf returning its error: no node answered, or the first
// that did names no live master for the slot (during a failover).
func (c *Cluster) Owner(key string) (int, error) {
	var errs []error
	for _, addr := range c.Seeds {
		i, err := c.masterOf(addr, key)
		if err == nil {
			return i, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			break // the node answered
		}
	}
	return -1, fmt.Errorf("master of %q: %w", key, errors.Join(errs...))
}

func (c *Cluster) masterOf(addr, key string) (int, error) {
	s, err := command(addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return -1, err
	}
	slot, err := strconv.Atoi(s)
	if err != nil {
		return -1, fmt.Errorf("%s: CLUSTER KEYSLOT: %q", addr, s)
	}
	nodes, err := command(addr, "CLUSTER", "NODES")
	if err != nil {
		return -1, err
	}
	return c.slotOwner(nodes, slot)
}

// slotOwner returns the index into Seeds of the master that CLUSTER NODES
// text nodes names for slot: a line "id host:port@bus flags master ping
// pong epoch link slot-range...", flags holding "master" and not "fail".
func (c *Cluster) slotOwner(nodes string, slot int) (int, error) {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, _ := strings.Cut(r, "-")
			if hi == "" {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || slot < a || slot > b {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			for i, s := range c.Seeds {
				if s == addr {
					return i, nil
				}
			}
			return -1, fmt.Errorf("slot %d is served by %s, not a node of this cluster", slot, addr)
		}
	}
	return -1, fmt.Errorf("no master serves slot %d", slot)
}

// ReplicasOf returns the indexes into Seeds of the replicas of master i,
// as i sees them (its CLUSTER NODES).
func (c *Cluster) ReplicasOf(tb testing.TB, i int) []int {
	tb.Helper()
	nodes, err := c.Do(i, "CLUSTER", "NODES")
	if err != nil {
		tb.Fatal(err)
	}
	id := ""
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "myself") {
			id = f[0]
		}
	}
	var out []int
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != id || !strings.Contains(f[2], "slave") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		for j, s := range c.Seeds {
			if s == addr {
				out = append(out, j)
			}
		}
	}
	return out
}

// Do sends one command to node i (an index into Seeds) and returns its
// reply: the text of a simple string, integer or bulk string. An error
// reply, an array or a failed connection is an error.
func (c *Cluster) Do(i int, args ...string) (string, error) {
	return command(c.Seeds[i], args...)
}

// command sends one command to addr and returns its reply: the text of a
// simple string, integer or bulk string; an error reply or a failed
// connection is an error. It is enough for CLUSTER KEYSLOT and NODES.
func command(addr string, args ...string) (string, error) {
	cn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer cn.Close()
	_ = cn.SetDeadline(time.Now().Add(5 * time.Second)) // bounds a hung node; times nothing
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := cn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(cn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("%s: empty reply", addr)
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s: %s", addr, line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s: bulk header %q", addr, line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%s: unexpected reply %q", addr, line)
}
