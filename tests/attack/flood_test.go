package attack

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// floodKeys is how many unique keys TestKeyFlood sends: ten million, or
// three million with -short; ATTACK_FLOOD_KEYS overrides both.
func floodKeys(t *testing.T) int {
	if s := os.Getenv("ATTACK_FLOOD_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("ATTACK_FLOOD_KEYS=%q is not a positive number", s)
		}
		return n
	}
	if testing.Short() {
		return 3_000_000
	}
	return 10_000_000
}

// TestKeyFlood sends millions of unique keys, pipelined over several
// connections, to a server bounded at a million keys. Between rounds a
// set of hot keys is touched: the key count never passes the bound, and
// the hot keys keep their state (CLOCK gives a key used between two passes
// of its hand a second chance; a round is shorter than one pass).
func TestKeyFlood(t *testing.T) {
	const (
		maxKeys   = 1_000_000
		roundKeys = 500_000 // under maxKeys: at most one pass of the hand per round
		conns     = 4
		hot       = 200
		hotLimit  = 1000
	)
	total := floodKeys(t)
	p := startServer(t, "--maxkeys", strconv.Itoa(maxKeys))
	admin := dial(t, p)
	watch := watchRSS(t, p)
	hotConn := dial(t, p)
	touchHot := func(round int) {
		t.Helper()
		var req []byte
		for i := 0; i < hot; i++ {
			// 1000 per 100 days: nothing drips back during the test.
			req = appendCmd(req, "THROTTLE.CHECK", "hot:"+strconv.Itoa(i), strconv.Itoa(hotLimit), "100d")
		}
		hotConn.write(req)
		_ = hotConn.c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for i := 0; i < hot; i++ {
			v, err := hotConn.reply()
			if err != nil {
				t.Fatalf("hot key %d: %v", i, err)
			}
			want := int64(hotLimit - round - 1)
			if v.kind != '*' || len(v.elems) != 5 || v.elems[2].n != want {
				t.Fatalf("after %d flood rounds hot:%d = %+v, want remaining %d (state lost: evicted?)", round, i, v, want)
			}
		}
	}

	start := time.Now()
	touchHot(0)
	sent := 0
	for round := 1; sent < total; round++ {
		n := min(roundKeys, total-sent)
		flood(t, p, conns, round, n)
		sent += n
		touchHot(round)
		if size := admin.do("DBSIZE"); size.kind != ':' || size.n > maxKeys {
			t.Fatalf("after %d keys DBSIZE = %+v, over maxkeys %d", sent, size, maxKeys)
		}
	}
	took := time.Since(start)
	peak := watch.stop()
	size := admin.do("DBSIZE")
	t.Logf("%d unique keys over %d connections in %v (%.0f keys/s); DBSIZE %d; peak RSS %s; %s",
		total, conns, took.Round(time.Millisecond), float64(total)/took.Seconds(), size.n, mib(peak),
		infoField(admin.do("INFO", "stats").str, "evicted_keys"))
	if size.n < maxKeys*9/10 {
		t.Errorf("DBSIZE %d after the flood: the store should be nearly full (keys live 6 minutes)", size.n)
	}
}

// flood sends n THROTTLE.CHECK commands on new keys of round, split over
// conns pipelined connections, and waits for every reply.
func flood(t *testing.T, p *proc, conns, round, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for c := 0; c < conns; c++ {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(120 * time.Second))
		share := n / conns
		if c < n%conns {
			share++
		}
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			var buf, key []byte
			prefix := fmt.Sprintf("f:%d:%d:", round, c)
			for i := 0; i < share; i++ {
				key = strconv.AppendInt(append(key[:0], prefix...), int64(i), 10)
				buf = appendCmd(buf, "THROTTLE.CHECK", string(key), "10", "1h")
				if len(buf) > 64<<10 || i == share-1 {
					if _, err := nc.Write(buf); err != nil {
						errs <- fmt.Errorf("flood write: %w", err)
						return
					}
					buf = buf[:0]
				}
			}
		}()
		go func() { // reader: each reply is an array of five integers
			defer wg.Done()
			defer nc.Close()
			r := bufio.NewReaderSize(nc, 256<<10)
			for got := 0; got < share; {
				line, err := r.ReadSlice('\n')
				if err != nil {
					errs <- fmt.Errorf("flood read after %d of %d replies: %w", got, share, err)
					return
				}
				switch line[0] {
				case '*':
					got++
				case ':':
				default:
					errs <- fmt.Errorf("flood reply %d: %q", got, line)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("round %d: %v; server log:\n%s", round, err, p.log.String())
	}
}

// infoField returns the "name:value" line of an INFO reply, or a note that
// it is absent.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, name+":") {
			return line
		}
	}
	return name + " not in INFO"
}
