package glob

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// TestMatchAgainstRedis compares Match with a real redis-server: the keys
// KEYS returns for each pattern of up to two glob tokens, and for the
// patterns of the fuzz corpus' themes, out of a keyspace of short byte
// strings, must be the subjects Match accepts.
func TestMatchAgainstRedis(t *testing.T) {
	bin := testdeps.Require(t, "redis-server")[0]
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait for the socket (the deadline bounds a broken start, it times nothing).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not create its socket")
		}
	}
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, Protocol: 2, MaxRetries: 20})
	defer rc.Close()

	tokens := []string{"a", "b", "*", "?", "[", "]", "^", "-", "\\", "\\*", "[a-b]", "[^a]", "[b-a]", "[\\]]", "[a-", "\xe9", "[\x80-\x7f]"}
	patterns := []string{"", "**a**", "*a*a*b", "a\\", "[", "[^", "[a-", "[\\", "\\[a]", "[]a]", "[!a]", "*[a-\xe9]*"}
	for _, x := range tokens {
		patterns = append(patterns, x)
		for _, y := range tokens {
			patterns = append(patterns, x+y)
		}
	}
	alphabet := []string{"a", "b", "c", "*", "?", "[", "]", "^", "-", "\\", "\xe9", "\x7f", "\x80"}
	var subjects []string
	for _, x := range alphabet {
		subjects = append(subjects, x)
		for _, y := range alphabet {
			subjects = append(subjects, x+y)
		}
	}
	pairs := make([]any, 0, 2*len(subjects))
	for _, s := range subjects {
		pairs = append(pairs, s, "1")
	}
	if err := rc.MSet(ctx, pairs...).Err(); err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, p := range patterns {
		want, err := rc.Keys(ctx, p).Result()
		if err != nil {
			t.Fatalf("KEYS %q: %v", p, err)
		}
		var got []string
		for _, s := range subjects {
			if Match(p, []byte(s)) {
				got = append(got, s)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("pattern %q: Match accepts %q, redis-server's KEYS returns %q", p, got, want)
		}
		matched += len(got)
	}
	t.Logf("%d patterns x %d keys, %d matches", len(patterns), len(subjects), matched)
}
