//go:build race

package server

// admRace reports whether the race detector is on: sync.Pool then drops
// items at random, so allocation counts mean nothing.
const admRace = true
