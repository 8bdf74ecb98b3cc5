// Package persisttests proves the server's persistence end to end: the real
// binary (internal/testserver) over a real PostgreSQL (internal/pgtest) or
// dynalite (internal/dynatest), killed with SIGKILL under load and started
// again on the same table, a backend stopped and restarted under load, and
// a start-up load held back by a lock.
//
// The crash tests count, per key, the units the server acknowledged as
// consumed before the kill (allowed THROTTLE.CHECK replies the client
// read) and the commands sent, and compare them with what THROTTLE.PEEK
// reports after the restart. The limit (GCRA, ten thousand a year) gives
// a key back one unit every 52 minutes, so the expected count is exact:
// acknowledged minus floor(elapsed/emission), which is the acknowledged
// count itself in any test shorter than that. In sync mode nothing
// acknowledged may be missing, on any key, and the load is spread over
// few enough keys that each gets many units. In async mode the test polls
// INFO persistence during the load: the last answer before the kill says
// every change older than its persist_lag_ms was durable, so every unit
// acknowledged before that instant must survive; the loss is logged in
// milliseconds of traffic beside the interval and the flush durations
// (from /metrics). No key may show more units than commands were sent.
//
// The load generator here is deliberately small: raw RESP over TCP, a
// fixed pipeline depth per connection, one goroutine per connection.
// BenchmarkPersist (set TK_PERSIST_BENCH=1) reuses it to compare
// throughput and latency of in-memory, async and sync servers.
package persisttests
