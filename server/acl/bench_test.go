package acl

import "testing"

// BenchmarkCheck measures the per-command check the server runs before each
// command: GET with one key, for a user with allkeys and for one with three
// key patterns where the key matches the last.
func BenchmarkCheck(b *testing.B) {
	a := newTestACL(b)
	if err := a.SetUser("all", "on", "allkeys", "+@all"); err != nil {
		b.Fatal(err)
	}
	if err := a.SetUser("three", "on", "~app:*:limit", "%R~shared:*", "~user:*", "+@read", "+@write"); err != nil {
		b.Fatal(err)
	}
	ar := args("get", "user:1234567:rl")
	keys := []KeyRef{{Pos: 1, Access: KeyRead}}
	for _, name := range []string{"all", "three"} {
		u := a.User(name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !u.Check(cGet, -1, ar, keys).OK() {
					b.Fatal("denied")
				}
			}
		})
	}
}

// BenchmarkCanRun measures the command-only check (one bit test).
func BenchmarkCanRun(b *testing.B) {
	a := newTestACL(b)
	if err := a.SetUser("u", "on", "+@read", "-keys"); err != nil {
		b.Fatal(err)
	}
	u := a.User("u")
	b.ReportAllocs()
	for b.Loop() {
		if !u.CanRun(cGet, -1) {
			b.Fatal("denied")
		}
	}
}

// BenchmarkStale measures the per-command staleness test a connection runs.
func BenchmarkStale(b *testing.B) {
	u := newTestACL(b).User("default")
	b.ReportAllocs()
	for b.Loop() {
		if u.Stale() {
			b.Fatal("stale")
		}
	}
}

// BenchmarkAuthenticate measures AUTH with a correct password (one SHA-256).
func BenchmarkAuthenticate(b *testing.B) {
	a := newTestACL(b)
	if err := a.SetUser("u", "on", ">a-reasonably-long-password"); err != nil {
		b.Fatal(err)
	}
	user, pass := []byte("u"), []byte("a-reasonably-long-password")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(user, pass); err != nil {
			b.Fatal(err)
		}
	}
}
