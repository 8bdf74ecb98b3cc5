package acl

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersAndWriter runs readers that check commands, follow
// stale users and authenticate while a writer changes, deletes and reloads
// users. Run it with -race. Every snapshot a reader sees must be coherent:
// alice alternates between two complete rule sets, never a mix.
func TestConcurrentReadersAndWriter(t *testing.T) {
	a := newTestACL(t)
	setA := []string{"reset", "on", ">pa", "~a:*", "+get"}
	setB := []string{"reset", "on", ">pb", "~b:*", "+set"}
	if err := a.SetUser("alice", setA...); err != nil {
		t.Fatal(err)
	}
	const writes = 400
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The writer may have deleted alice for a moment: wait for her.
			var u *User
			for u == nil && !done.Load() {
				u = a.User("alice")
			}
			for u != nil && !done.Load() {
				if u.Stale() {
					nu, ok := a.Refresh(u)
					if !ok {
						nu = a.User("alice")
						if nu == nil {
							continue // deleted for now: a server would close the connection
						}
					}
					u = nu
				}
				get := u.Check(cGet, -1, args("get", "a:1"), []KeyRef{{1, KeyRead}}).OK()
				set := u.Check(cSet, -1, args("set", "b:1", "v"), []KeyRef{{1, KeyWrite}}).OK()
				if get == set {
					errs <- fmt.Errorf("reader %d: incoherent user: get=%v set=%v (%s)", r, get, set, u.Rules())
					return
				}
				// Whichever version is current, authentication gives a user or WRONGPASS.
				if au, err := a.Authenticate([]byte("alice"), []byte("pa")); err != nil && err != ErrWrongPass || err == nil && au.Name() != "alice" {
					errs <- fmt.Errorf("reader %d: Authenticate = %v, %v", r, au, err)
					return
				}
				_ = a.List()
			}
		}()
	}
	for i := range writes {
		rules := setA
		if i%2 == 1 {
			rules = setB
		}
		if err := a.SetUser("alice", rules...); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if _, err := a.DelUser("alice"); err != nil {
				t.Fatal(err)
			}
			if err := a.SetUser("alice", rules...); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.SetUser(fmt.Sprint("other", i%10), "on", "+@read"); err != nil {
			t.Fatal(err)
		}
		a.SetRequirePass(fmt.Sprint(i))
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
