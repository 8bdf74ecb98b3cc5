package server

import (
	"math/rand/v2"
	"testing"
)

// TestFlushPublishesEverything: flush visits cmds and lat through their
// dirty masks; whatever mix of commands and batch times a loop counts,
// the published totals equal the sums of what was counted, flush after
// flush, and the plain counters are zero after each.
func TestFlushPublishesEverything(t *testing.T) {
	var c counters
	var p published
	var wantCmds [numCmds]int64
	var wantLat [numBuckets + 1]int64
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		for k := rng.IntN(20); k > 0; k-- {
			id := cmdID(rng.IntN(int(numCmds)))
			c.countCmd(id)
			wantCmds[id]++
		}
		if rng.IntN(4) > 0 {
			d := rng.Int64N(2_000_000_000) // past the last bound too
			n := 1 + rng.Int64N(16)
			c.observe(d, n)
			i := 0
			for i < numBuckets && d > latencyBounds[i] {
				i++
			}
			wantLat[i] += n
		}
		c.flush(&p)
		for i := range wantCmds {
			if got := p.cmds[i].Load(); got != wantCmds[i] || c.cmds[i] != 0 {
				t.Fatalf("round %d: command %d published %d (plain %d), want %d", round, i, got, c.cmds[i], wantCmds[i])
			}
		}
		for i := range wantLat {
			if got := p.lat[i].Load(); got != wantLat[i] || c.lat[i] != 0 {
				t.Fatalf("round %d: latency bucket %d published %d (plain %d), want %d", round, i, got, c.lat[i], wantLat[i])
			}
		}
	}
}
