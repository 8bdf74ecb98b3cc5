//go:build race

package throttlekit_test

// raceEnabled reports whether the race detector is on: the hammering tests
// scale down under it (it slows every memory access several times).
const raceEnabled = true
