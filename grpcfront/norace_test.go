//go:build !race

package grpcfront

// raceOn reports whether the race detector is on.
const raceOn = false
