package clustertest

import (
	"bufio"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// TestSlotOwner reads the master of a slot from CLUSTER NODES text:
// ranges, single slots, migrating entries, failed masters and replicas.
func TestSlotOwner(t *testing.T) {
	c := &Cluster{Seeds: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}
	nodes := "a 127.0.0.1:1@11 myself,master - 0 0 1 connected 0-99 [100->-b]\n" +
		"b 127.0.0.1:2@12 master - 0 0 2 connected 100 101-200\n" +
		"c 127.0.0.1:3@13 slave b 0 0 2 connected\n" +
		"d 127.0.0.1:4@14 master,fail - 0 0 3 disconnected 201-300\n"
	for _, tt := range []struct {
		slot, want int
		err        string
	}{
		{0, 0, ""}, {99, 0, ""}, {100, 1, ""}, {150, 1, ""}, {200, 1, ""},
		{250, -1, "no master serves slot 250"}, {301, -1, "no master serves slot 301"},
	} {
		got, err := c.slotOwner(nodes, tt.slot)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
			t.Errorf("slot %d: %d, %v; want %d, %q", tt.slot, got, err, tt.want, tt.err)
		}
	}
	if _, err := c.slotOwner("e 127.0.0.1:9@19 master - 0 0 4 connected 0-16383\n", 5); err == nil ||
		!strings.Contains(err.Error(), "not a node of this cluster") {
		t.Errorf("a stranger's slot: %v", err)
	}
}

// TestKillRestart: killing the master of a key's slot hands the slot to
// another node (its replica, after the node timeout); the killed node,
// restarted on its old port, rejoins and the cluster is whole again.
func TestKillRestart(t *testing.T) {
	c := StartWith(t, Options{NodeTimeout: time.Second})
	old := c.MasterOf(t, "k")
	replicas := c.ReplicasOf(t, old)
	if len(replicas) != 1 {
		t.Fatalf("master %d has replicas %v, want one", old, replicas)
	}
	c.Kill(t, old)
	if _, err := net.Dial("tcp", c.Seeds[old]); err == nil {
		t.Fatal("the killed node still accepts connections")
	}
	// Nodes learn of the failover by gossip, one after another: wait until
	// the node Owner asks names a live master other than the killed one.
	served := func(what string) int {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; { // bounds a broken run; times nothing
			i, err := c.Owner("k")
			if err == nil && i != old {
				return i
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: slot of \"k\" served by %d, %v", what, i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if i := served("no failover of the killed master"); i != replicas[0] {
		t.Fatalf("slot served by %d after the failover, want the replica %d", i, replicas[0])
	}
	c.Restart(t, old)
	info, err := command(c.Seeds[old], "INFO", "replication")
	if err != nil || !strings.Contains(info, "role:slave") {
		t.Fatalf("the restarted node's INFO replication: %q, %v", info, err)
	}
	served("the restarted node took its slot back") // it is a replica now: never the owner
}
