package clustertest

import (
	"bufio"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestServer starts a standalone redis-server and talks to it.
func TestServer(t *testing.T) {
	addr := Server(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v", line, err)
	}
}

// TestScriptUsage: the cluster script refuses stop and seeds without a
// directory instead of acting on a guess.
func TestScriptUsage(t *testing.T) {
	for _, cmd := range []string{"stop", "seeds"} {
		out, err := exec.Command(script(t), cmd).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "usage") {
			t.Errorf("%s without DIR: %v, %q; want a usage error", cmd, err, out)
		}
	}
}
