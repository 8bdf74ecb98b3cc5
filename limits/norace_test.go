//go:build !race

package limits

// raceOn reports whether the race detector is on: sync.Pool then drops
// items at random, so allocation counts mean nothing.
const raceOn = false
