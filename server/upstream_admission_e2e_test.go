package server_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/server"
)

// admStep is one command of admissionScript. "$" becomes a per-run
// prefix and "@name" the token or reservation id the step named name
// captured from its reply on the same server: tokens and ids differ
// between the servers (over the upstream they carry other numbers), so the
// comparison puts the name in their place.
type admStep struct {
	cmd     []string
	capture string
}

// admissionScript exercises every admission command over the upstream:
// slots (acquire up to the limit, refresh, expiry, release, stale and
// foreign tokens), reservations (refund, charge past the limit, settled
// once, unknown ids) and the penalty box (counting, a ban, its time left,
// unban), with the errors of each.
var admissionScript = []admStep{
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "10s"}, "t1"},
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "10s"}, "t2"},
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "10s"}, ""},
	{[]string{"ADVANCE", "2s"}, ""},
	{[]string{"THROTTLE.REFRESH", "$s", "@t1", "30s"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "10s"}, ""},
	{[]string{"ADVANCE", "9s"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "10s"}, "t3"},
	{[]string{"THROTTLE.REFRESH", "$s", "@t2", "30s"}, ""},
	{[]string{"THROTTLE.RELEASE", "$s", "@t2"}, ""},
	{[]string{"THROTTLE.RELEASE", "$s", "@t1"}, ""},
	{[]string{"THROTTLE.RELEASE", "$s", "@t1"}, ""},
	{[]string{"THROTTLE.RELEASE", "$s", "5.99"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "1", "10s"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "3", "10s"}, "t4"},
	{[]string{"THROTTLE.RELEASE", "$s", "bad"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "0", "10s"}, ""},
	{[]string{"THROTTLE.ACQUIRE", "$s", "2", "-1"}, ""},

	{[]string{"THROTTLE.RESERVE", "$r", "10", "1s", "COST", "8", "ALGO", "token"}, "r1"},
	{[]string{"THROTTLE.RESERVE", "$r", "10", "1s", "COST", "8", "ALGO", "token"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r", "@r1", "3"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r", "@r1", "3"}, ""},
	{[]string{"THROTTLE.CHECK", "$r", "10", "1s", "ALGO", "token", "COST", "5"}, ""},
	{[]string{"THROTTLE.RESERVE", "$r2", "5", "1s", "COST", "2", "ALGO", "fixed", "TTL", "5s"}, "r2"},
	{[]string{"THROTTLE.SETTLE", "$r2", "@r2", "9"}, ""},
	{[]string{"THROTTLE.CHECK", "$r2", "5", "1s", "ALGO", "fixed"}, ""},
	{[]string{"THROTTLE.RESERVE", "$r3", "5", "1s", "COST", "2", "TTL", "1s"}, "r3"},
	{[]string{"ADVANCE", "1500ms"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r3", "@r3", "0"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r", "1.1.10.1000000000", "1"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r", "junk", "1"}, ""},
	{[]string{"THROTTLE.SETTLE", "$r", "@r1", "-1"}, ""},
	{[]string{"THROTTLE.RESERVE", "$r", "10", "1s", "COST", "-1", "ALGO", "token"}, ""},
	{[]string{"THROTTLE.RESERVE", "$r", "10", "1s", "COST", "1", "ALGO", "gcra"}, "r4"},
	{[]string{"THROTTLE.CHECK", "$w", "5", "1s", "ALGO", "fixed"}, ""},
	{[]string{"THROTTLE.RESERVE", "$w", "5", "1s", "COST", "1", "ALGO", "gcra"}, ""},
	{[]string{"THROTTLE.CHECK", "$w", "5", "1s", "BAN", "1", "1s"}, ""},

	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "COST", "0", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.BANNED", "$b"}, ""},
	{[]string{"ADVANCE", "1s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.BANNED", "$b"}, ""},
	{[]string{"THROTTLE.UNBAN", "$b"}, ""},
	{[]string{"THROTTLE.UNBAN", "$b"}, ""},
	{[]string{"THROTTLE.BANNED", "$b"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "ALGO", "fixed", "BAN", "2", "5s"}, ""},
	{[]string{"THROTTLE.CHECK", "$b", "1", "1s", "BAN", "0", "5s"}, ""},
	{[]string{"THROTTLE.BANNED", "$nobody"}, ""},
}

// startAdmUpstream is startUpstream with, when pki is set, a TLS listener
// beside the plain one.
func startAdmUpstream(t *testing.T, url string, clk *upClock, pki *testPKI, mutate ...func(*server.Config)) *testServer {
	t.Helper()
	ts, _ := startUpstream(t, url, clk, upOpts{mutate: func(cfg *server.Config) {
		if pki != nil {
			cfg.TLS = server.TLSConfig{Addr: "127.0.0.1:0", CertFile: pki.certFile, KeyFile: pki.keyFile, CAFile: pki.caFile,
				Auth: server.TLSAuthOptional}
		}
		for _, m := range mutate {
			m(cfg)
		}
	}})
	return ts
}

// captured returns v with the token (ACQUIRE) or id (RESERVE) replaced by
// "<name>", and the token or id ("" when the reply has none).
func captured(v any, name string) (any, string) {
	switch r := v.(type) {
	case []any: // RESP2: the token is the 4th field, the id the 6th
		for _, i := range []int{3, 5} {
			if len(r) == i+2 || len(r) == 6 && i == 5 {
				if s, ok := r[i].(string); ok {
					c := append([]any(nil), r...)
					c[i] = "<" + name + ">"
					return c, s
				}
			}
		}
	case map[any]any: // RESP3
		for _, k := range []string{"token", "id"} {
			if s, ok := r[k].(string); ok {
				c := map[any]any{}
				for kk, vv := range r {
					c[kk] = vv
				}
				c[k] = "<" + name + ">"
				return c, s
			}
		}
	}
	return v, ""
}

// sameAdmissionAsMemory runs admissionScript on an in-memory server and
// on one over the upstream at url (its plain or TLS listener), at the
// same instants, RESP2 and RESP3, and wants the same replies.
func sameAdmissionAsMemory(t *testing.T, url string, useTLS bool) {
	var pki *testPKI
	if useTLS {
		pki = newTestPKI(t)
	}
	for _, proto := range []int{2, 3} {
		clk := newUpClock()
		mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now })
		up := startAdmUpstream(t, url, clk, pki)
		mc := goredis(t, mem.Addr, proto)
		var uc *redis.Client
		if useTLS {
			uc = redis.NewClient(&redis.Options{Addr: tlsAddr(t, up), Protocol: proto, MaxRetries: -1, TLSConfig: pki.clientTLS(true)})
			t.Cleanup(func() { _ = uc.Close() })
		} else {
			uc = goredis(t, up.Addr, proto)
		}
		prefix := fmt.Sprintf("adm%d%v:", proto, useTLS)
		memIDs, upIDs := map[string]string{}, map[string]string{}
		args := func(cmd []string, ids map[string]string) []string {
			c := append([]string(nil), cmd...)
			for j := range c {
				c[j] = strings.ReplaceAll(c[j], "$", prefix)
				if strings.HasPrefix(c[j], "@") {
					c[j] = ids[c[j][1:]]
				}
			}
			return c
		}
		captures, answered := 0, 0
		for i, st := range admissionScript {
			if st.cmd[0] == "ADVANCE" {
				d, _ := time.ParseDuration(st.cmd[1])
				clk.ns.Add(int64(d))
				continue
			}
			want, got := reply(mc, args(st.cmd, memIDs)...), reply(uc, args(st.cmd, upIDs)...)
			if st.capture != "" {
				var wid, gid string
				want, wid = captured(want, st.capture)
				got, gid = captured(got, st.capture)
				if wid == "" || gid == "" {
					t.Fatalf("RESP%d step %d %q: no token or id to capture: memory %#v, upstream %#v", proto, i, st.cmd, want, got)
				}
				memIDs[st.capture], upIDs[st.capture] = wid, gid
				captures++
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("RESP%d step %d %q: upstream %#v, in memory %#v", proto, i, st.cmd, got, want)
			}
			if s, isErr := want.(string); !isErr || !strings.HasPrefix(s, "error: ") {
				answered++
			}
		}
		// Most steps are answers, not errors: the comparison is not
		// between two servers that refuse everything.
		if answered < 38 {
			t.Errorf("RESP%d: %d steps answered without an error, want at least 38", proto, answered)
		}
		if captures != 8 {
			t.Fatalf("captured %d tokens and ids, want 8", captures)
		}
	}
}

// TestUpstreamAdmissionSameAsMemory: every admission command over an
// upstream answers as the in-memory server does at the same instants,
// RESP2 and RESP3: on one redis-server (plain and TLS connections, whose
// parked replies take different paths) and on the 6-node cluster.
func TestUpstreamAdmissionSameAsMemory(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		sameAdmissionAsMemory(t, "redis://"+clustertest.Server(t), false)
	})
	t.Run("tls", func(t *testing.T) {
		sameAdmissionAsMemory(t, "redis://"+clustertest.Server(t), true)
	})
	t.Run("cluster", func(t *testing.T) {
		sameAdmissionAsMemory(t, clustertest.Start(t).URL(), false)
	})
}

// TestUpstreamAdmissionNoRecordBound: over an upstream the records live
// there, so the server's own record bound (admission-maxrecords) never
// refuses one: with room for one local record, three slots and two
// reservations are taken, where the in-memory server answers OOM.
func TestUpstreamAdmissionNoRecordBound(t *testing.T) {
	clk := newUpClock()
	bound := func(cfg *server.Config) { cfg.AdmissionMaxRecords = 1 }
	mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now; bound(cfg) })
	up := startAdmUpstream(t, "redis://"+clustertest.Server(t), clk, nil, bound)
	mc, uc := goredis(t, mem.Addr, 3), goredis(t, up.Addr, 3)
	var memOOM int
	for i, cmd := range [][]string{
		{"THROTTLE.ACQUIRE", "nb:a", "5", "10s"},
		{"THROTTLE.ACQUIRE", "nb:b", "5", "10s"},
		{"THROTTLE.ACQUIRE", "nb:c", "5", "10s"},
		{"THROTTLE.RESERVE", "nb:r", "5", "1s", "COST", "1"},
		{"THROTTLE.RESERVE", "nb:r", "5", "1s", "COST", "1"},
	} {
		got := reply(uc, cmd...)
		m, ok := got.(map[any]any)
		if !ok || m["allowed"] != int64(1) && m["acquired"] != int64(1) {
			t.Errorf("upstream step %d %q: %#v, want admitted", i, cmd, got)
		}
		if s, ok := reply(mc, cmd...).(string); ok && strings.Contains(s, "OOM") {
			memOOM++
		}
	}
	if memOOM == 0 {
		t.Error("the in-memory server never hit its bound of one record: the test proves nothing")
	}
}

// TestUpstreamAdmissionInExec: inside MULTI/EXEC over an upstream the
// admission commands run, each its own script, and EXEC's replies are
// the in-memory server's at the same instant.
func TestUpstreamAdmissionInExec(t *testing.T) {
	clk := newUpClock()
	mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now })
	up := startAdmUpstream(t, "redis://"+clustertest.Server(t), clk, nil)
	ctx := context.Background()
	exec := func(c *redis.Client) []any {
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "THROTTLE.ACQUIRE", "{x}s", "1", "10s")
			p.Do(ctx, "THROTTLE.ACQUIRE", "{x}s", "1", "10s")
			p.Do(ctx, "THROTTLE.CHECK", "{x}b", "1", "1s", "COST", "2", "BAN", "1", "5s")
			p.Do(ctx, "THROTTLE.BANNED", "{x}b")
			p.Do(ctx, "THROTTLE.UNBAN", "{x}b")
			p.Do(ctx, "THROTTLE.RESERVE", "{x}r", "5", "1s", "COST", "9")
			p.Do(ctx, "THROTTLE.SETTLE", "{x}r", "1.1.5.1000000000", "1")
			return nil
		})
		if err != nil {
			t.Fatalf("EXEC: %v", err)
		}
		out := make([]any, 0, len(cmds))
		for i, c := range cmds {
			v, err := c.(*redis.Cmd).Result()
			if err != nil {
				v = "error: " + err.Error()
			}
			if i == 0 { // the token: numbers differ, its presence does not
				v, _ = captured(v, "tok")
			}
			out = append(out, v)
		}
		return out
	}
	want, got := exec(goredis(t, mem.Addr, 2)), exec(goredis(t, up.Addr, 2))
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("EXEC: upstream %#v, in memory %#v", got, want)
	}
	if fmt.Sprint(want[0]) == fmt.Sprint(want[1]) || want[3] != int64(5000) {
		t.Fatalf("EXEC in memory did not acquire, deny and ban: %#v", want)
	}
}
