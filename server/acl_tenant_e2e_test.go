package server_test

// Tenant isolation end to end, over real TCP with go-redis (and redis-cli's
// --scan): a tenant confined to ~tenant:a:* runs the throttle commands, the
// keyspace commands and transactions on its own keys; every attempt on
// another tenant's keys is refused with NOPERM and changes nothing, which an
// admin checks; SCAN and KEYS show a tenant its own keys only; FLUSHALL and
// FLUSHDB need @dangerous; ACL LOG records each denial.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/server"
)

// tenantClock is the frozen time of the isolation test (Unix ms), so that
// what the admin reads of tenant B's keys before and after can be compared
// exactly.
const tenantClock = int64(1_700_000_000_000)

// bKeys are tenant B's keys, created by B before tenant A tries anything.
var bKeys = []string{"tenant:b:x", "tenant:b:lease", "tenant:b:cell", "tenant:b:y"}

// snapshotB is what an admin sees of tenant B's keys: their names, and
// for each its TYPE, PTTL and (for the one GCRA key) THROTTLE.PEEK.
func snapshotB(t *testing.T, ctx context.Context, admin *redis.Client) string {
	t.Helper()
	var b strings.Builder
	names := anyStrings(t, mustDo(t, ctx, admin, "KEYS", "tenant:b:*"))
	slices.Sort(names)
	fmt.Fprintf(&b, "keys %v\n", names)
	if len(names) != len(bKeys) {
		t.Fatalf("tenant B holds %v, want %v", names, bKeys)
	}
	for _, k := range names {
		fmt.Fprintf(&b, "%s type=%v pttl=%v\n", k, mustDo(t, ctx, admin, "TYPE", k), mustDo(t, ctx, admin, "PTTL", k))
	}
	fmt.Fprintf(&b, "peek %v\n", mustDo(t, ctx, admin, "THROTTLE.PEEK", "tenant:b:x", "10", "1m"))
	return b.String()
}

// anyStrings converts a go-redis array reply of strings.
func anyStrings(t *testing.T, v any) []string {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %#v is not an array", v)
	}
	out := make([]string, len(l))
	for i, x := range l {
		if out[i], ok = x.(string); !ok {
			t.Fatalf("element %d of %#v is not a string", i, v)
		}
	}
	return out
}

func TestACLTenantIsolation(t *testing.T) {
	// Two ways to give a tenant the keyspace: everything but @dangerous, or
	// the categories it needs. KEYS is @dangerous in Redis, so both add it
	// back by name; FLUSHALL and FLUSHDB stay out.
	variants := []struct {
		name  string
		rules []string
	}{
		{"all", []string{"+@all", "-@dangerous", "+keys"}},
		{"categories", []string{"+@throttle", "+@keyspace", "+@transaction", "+@connection", "-@dangerous", "+keys"}},
	}
	for _, v := range variants {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", v.name, proto), func(t *testing.T) {
				testTenantIsolation(t, v.rules, proto)
			})
		}
	}
}

func testTenantIsolation(t *testing.T, rules []string, proto int) {
	ts := startServer(t, func(c *server.Config) {
		c.RequirePass = "adminpw"
		c.Clock = func() int64 { return tenantClock * 1e6 }
	})
	ctx := context.Background()
	admin := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Password = "adminpw" })
	setA := append([]any{"ACL", "SETUSER", "tenanta", "on", ">pw-a", "~tenant:a:*"}, anySlice(rules)...)
	mustDo(t, ctx, admin, setA...)
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenantb", "on", ">pw-b", "~tenant:b:*", "+@all", "-@dangerous")
	a := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Username, o.Password = "tenanta", "pw-a" })
	b := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Username, o.Password = "tenantb", "pw-b" })

	// Tenant B's keys, one of each kind.
	mustDo(t, ctx, b, "THROTTLE.CHECK", "tenant:b:x", "10", "1m", "COST", "3")
	mustDo(t, ctx, b, "THROTTLE.LEASE", "tenant:b:lease", "100", "1m", "BATCH", "10")
	mustDo(t, ctx, b, "CL.THROTTLE", "tenant:b:cell", "10", "10", "60")
	mustDo(t, ctx, b, "THROTTLE.CHECK", "tenant:b:y", "5", "1h", "ALGO", "token")
	before := snapshotB(t, ctx, admin)

	// Within its patterns tenant A runs everything.
	mustDo(t, ctx, a, "THROTTLE.CHECK", "tenant:a:x", "10", "1m")
	mustDo(t, ctx, a, "THROTTLE.PEEK", "tenant:a:x", "10", "1m")
	mustDo(t, ctx, a, "THROTTLE.LEASE", "tenant:a:lease", "100", "1m", "BATCH", "10")
	mustDo(t, ctx, a, "CL.THROTTLE", "tenant:a:cell", "10", "10", "60")
	mustDo(t, ctx, a, "THROTTLE.CHECK", "tenant:a:del", "10", "1m")
	mustDo(t, ctx, a, "THROTTLE.CHECK", "tenant:a:unlink", "10", "1m")
	mustDo(t, ctx, a, "THROTTLE.CHECK", "tenant:a:kept", "10", "1m")
	ownKeys := []string{"tenant:a:cell", "tenant:a:del", "tenant:a:kept", "tenant:a:lease", "tenant:a:unlink", "tenant:a:x"}
	if n := mustDo(t, ctx, a, "EXISTS", "tenant:a:x", "tenant:a:lease", "tenant:a:nosuch"); n != int64(2) {
		t.Errorf("EXISTS of A's keys = %v, want 2", n)
	}
	if typ := mustDo(t, ctx, a, "TYPE", "tenant:a:lease"); typ != "fixed" {
		t.Errorf("TYPE tenant:a:lease = %v, want fixed", typ)
	}
	if ms := mustDo(t, ctx, a, "PTTL", "tenant:a:x"); ms.(int64) <= 0 || ms.(int64) > 60_000 {
		t.Errorf("PTTL tenant:a:x = %v, want (0, 60000]", ms)
	}
	if s := mustDo(t, ctx, a, "TTL", "tenant:a:x"); s.(int64) <= 0 || s.(int64) > 60 {
		t.Errorf("TTL tenant:a:x = %v, want (0, 60]", s)
	}

	// SCAN and KEYS show A its own keys only, while B's exist.
	scanned := map[string]bool{}
	iter := a.Scan(ctx, 0, "", 2).Iterator()
	for iter.Next(ctx) {
		scanned[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN as tenanta: %v", err)
	}
	if got := slices.Sorted(maps.Keys(scanned)); !slices.Equal(got, ownKeys) {
		t.Errorf("SCAN as tenanta = %v, want %v", got, ownKeys)
	}
	for _, pattern := range []string{"*", "tenant:*", "tenant:?:*"} {
		got := anyStrings(t, mustDo(t, ctx, a, "KEYS", pattern))
		slices.Sort(got)
		if !slices.Equal(got, ownKeys) {
			t.Errorf("KEYS %s as tenanta = %v, want %v", pattern, got, ownKeys)
		}
	}
	if got := anyStrings(t, mustDo(t, ctx, a, "KEYS", "tenant:b:*")); len(got) != 0 {
		t.Errorf("KEYS tenant:b:* as tenanta = %v, want none", got)
	}
	if keys, _, err := a.Scan(ctx, 0, "tenant:b:*", 1000).Result(); err != nil || len(keys) != 0 {
		t.Errorf("SCAN 0 MATCH tenant:b:* as tenanta = %v, %v; want no keys", keys, err)
	}
	// The admin sees both tenants.
	if got := anyStrings(t, mustDo(t, ctx, admin, "KEYS", "tenant:*")); len(got) != len(ownKeys)+len(bKeys) {
		t.Errorf("KEYS tenant:* as admin = %v, want A's and B's keys", got)
	}

	// A transaction on A's own keys.
	var peek, exists *redis.Cmd
	cmds, err := a.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "THROTTLE.CHECK", "tenant:a:tx", "10", "1m")
		peek = p.Do(ctx, "THROTTLE.PEEK", "tenant:a:tx", "10", "1m")
		exists = p.Do(ctx, "EXISTS", "tenant:a:tx", "tenant:a:x")
		p.Do(ctx, "DEL", "tenant:a:tx")
		return nil
	})
	if err != nil || len(cmds) != 4 {
		t.Fatalf("TxPipelined on A's keys: %v (%d replies)", err, len(cmds))
	}
	if n, _ := exists.Result(); n != int64(2) {
		t.Errorf("EXISTS in A's transaction = %v, want 2", n)
	}
	if _, err := peek.Result(); err != nil {
		t.Errorf("THROTTLE.PEEK in A's transaction: %v", err)
	}
	if n := mustDo(t, ctx, a, "EXISTS", "tenant:a:tx"); n != int64(0) {
		t.Errorf("tenant:a:tx after the transaction's DEL: EXISTS = %v", n)
	}

	// Every attempt on B's keys: NOPERM, nothing changed.
	denied := [][]any{
		{"THROTTLE.CHECK", "tenant:b:x", "10", "1m"},
		{"THROTTLE.PEEK", "tenant:b:x", "10", "1m"},
		{"THROTTLE.LEASE", "tenant:b:lease", "100", "1m", "BATCH", "10"},
		{"CL.THROTTLE", "tenant:b:cell", "10", "10", "60"},
		{"THROTTLE.RESET", "tenant:b:x"},
		{"THROTTLE.RESET", "tenant:a:kept", "tenant:b:x"},
		{"DEL", "tenant:b:x"},
		{"DEL", "tenant:a:kept", "tenant:b:x"},
		{"UNLINK", "tenant:b:x"},
		{"EXISTS", "tenant:b:x"},
		{"EXISTS", "tenant:a:kept", "tenant:b:x"},
		{"TYPE", "tenant:b:x"},
		{"TTL", "tenant:b:x"},
		{"PTTL", "tenant:b:x"},
		{"WATCH", "tenant:b:x"},
	}
	for _, args := range denied {
		if _, err := do(ctx, a, args...); err == nil || err.Error() != noPermKey {
			t.Errorf("%v as tenanta: err %v, want %q", args, err, noPermKey)
		}
	}
	// A transaction that names one of B's keys is refused as a whole: A's
	// own command in it does not run either.
	_, err = a.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "THROTTLE.CHECK", "tenant:a:txb", "10", "1m")
		p.Do(ctx, "DEL", "tenant:b:x")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Errorf("TxPipelined naming B's key: err %v, want EXECABORT", err)
	}
	for _, cmd := range []string{"FLUSHALL", "FLUSHDB"} {
		for _, args := range [][]any{{cmd}, {cmd, "ASYNC"}} {
			want := "NOPERM this user has no permissions to run the '" + strings.ToLower(cmd) + "' command"
			if _, err := do(ctx, a, args...); err == nil || err.Error() != want {
				t.Errorf("%v as tenanta: err %v, want %q", args, err, want)
			}
		}
	}
	if after := snapshotB(t, ctx, admin); after != before {
		t.Errorf("tenant B's keys changed by A's denied commands:\nbefore\n%safter\n%s", before, after)
	}
	if n := mustDo(t, ctx, admin, "EXISTS", "tenant:a:kept", "tenant:a:txb"); n != int64(1) {
		t.Errorf("after denied commands naming them, EXISTS tenant:a:kept tenant:a:txb = %v, want 1 (kept only)", n)
	}

	// A deletes its own keys.
	if n := mustDo(t, ctx, a, "THROTTLE.RESET", "tenant:a:x"); n != int64(1) {
		t.Errorf("THROTTLE.RESET tenant:a:x = %v, want 1", n)
	}
	if n := mustDo(t, ctx, a, "DEL", "tenant:a:del", "tenant:a:nosuch"); n != int64(1) {
		t.Errorf("DEL tenant:a:del tenant:a:nosuch = %v, want 1", n)
	}
	if n := mustDo(t, ctx, a, "UNLINK", "tenant:a:unlink"); n != int64(1) {
		t.Errorf("UNLINK tenant:a:unlink = %v, want 1", n)
	}
	if n := mustDo(t, ctx, admin, "EXISTS", "tenant:a:x", "tenant:a:del", "tenant:a:unlink"); n != int64(0) {
		t.Errorf("A's deleted keys: EXISTS = %v, want 0", n)
	}

	// ACL LOG: one entry per (reason, context, object), counted.
	wantCount := map[string]int64{
		"key/multi/tenant:b:x":      1,
		"command/toplevel/flushall": 2,
		"command/toplevel/flushdb":  2,
	}
	for _, args := range denied {
		for _, x := range args {
			if k := x.(string); strings.HasPrefix(k, "tenant:b:") {
				wantCount["key/toplevel/"+k]++
			}
		}
	}
	gotCount := map[string]int64{}
	for _, e := range mustDo(t, ctx, admin, "ACL", "LOG").([]any) {
		m := logEntry(t, e)
		id := fmt.Sprintf("%v/%v/%v", m["reason"], m["context"], m["object"])
		gotCount[id] += m["count"].(int64)
		if m["username"] != "tenanta" {
			t.Errorf("ACL LOG entry %s of user %v, want tenanta", id, m["username"])
		}
		info, _ := m["client-info"].(string)
		if !strings.Contains(info, " user=tenanta ") || !strings.HasPrefix(info, "id=") {
			t.Errorf("ACL LOG entry %s: client-info %q", id, info)
		}
		if age, ok := m["age-seconds"]; !ok || fmt.Sprint(age) != "0" {
			t.Errorf("ACL LOG entry %s: age-seconds %v, want 0 at a frozen clock", id, age)
		}
		if m["timestamp-created"] != tenantClock || m["timestamp-last-updated"] != tenantClock {
			t.Errorf("ACL LOG entry %s: timestamps %v, %v, want %d", id, m["timestamp-created"], m["timestamp-last-updated"], tenantClock)
		}
	}
	if fmt.Sprint(gotCount) != fmt.Sprint(wantCount) {
		t.Errorf("ACL LOG counts:\n got %v\nwant %v", gotCount, wantCount)
	}

	// Why FLUSHALL must stay out: as in Redis, it names no key, so key
	// patterns do not confine it. Granted it, a tenant empties every tenant.
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenanta", "+flushall")
	mustDo(t, ctx, a, "FLUSHALL")
	if n := mustDo(t, ctx, admin, "DBSIZE"); n != int64(0) {
		t.Errorf("DBSIZE after tenant A's FLUSHALL = %v, want 0", n)
	}
}

// TestACLTenantChangedBeforeExec: a tenant's transaction is queued while it
// may run every command in it; its key pattern changes before EXEC, which
// then refuses the commands on keys it lost, in Redis's words, and runs the
// others.
func TestACLTenantChangedBeforeExec(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.RequirePass = "adminpw" })
	ctx := context.Background()
	admin := newClient(t, ts.Addr, 2, func(o *redis.Options) { o.Password = "adminpw" })
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenanta", "on", ">pw-a", "~tenant:a:*", "+@throttle", "+@keyspace", "+@transaction", "+@connection", "-@dangerous")
	c := dialRaw(t, ts.Addr)
	if r := c.do(t, "AUTH", "tenanta", "pw-a"); r != "OK" {
		t.Fatalf("AUTH = %v", r)
	}
	c.do(t, "MULTI")
	for _, args := range [][]string{
		{"THROTTLE.CHECK", "tenant:a:old", "10", "1m"},
		{"THROTTLE.CHECK", "tenant:a:new:1", "10", "1m"},
	} {
		if r := c.do(t, args...); r != "QUEUED" {
			t.Fatalf("%v in MULTI: %v", args, r)
		}
	}
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenanta", "resetkeys", "~tenant:a:new:*")
	r, ok := c.do(t, "EXEC").([]any)
	want := respErr("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. " +
		"This command is no longer allowed for the following reason: no permission to touch the specified keys")
	if !ok || len(r) != 2 || r[0] != want {
		t.Fatalf("EXEC = %#v, want [%q, a decision]", r, want)
	}
	if _, ok := r[1].([]any); !ok {
		t.Fatalf("EXEC's second reply = %#v, want a decision", r[1])
	}
	if n := mustDo(t, ctx, admin, "EXISTS", "tenant:a:old", "tenant:a:new:1"); n != int64(1) {
		t.Fatalf("EXISTS tenant:a:old tenant:a:new:1 = %v, want 1 (the new key only)", n)
	}
	m := logEntry(t, mustDo(t, ctx, admin, "ACL", "LOG", "1").([]any)[0])
	if m["reason"] != "key" || m["context"] != "multi" || m["object"] != "tenant:a:old" || m["username"] != "tenanta" {
		t.Fatalf("ACL LOG entry %v", m)
	}
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
