//go:build race

package shard

// raceEnabled reports whether the race detector is on: the flood tests then
// run at their -short size, since it slows every access several times.
const raceEnabled = true
