// Package persisttests proves the server's persistence end to end: the real
// binary (internal/testserver) over a real PostgreSQL (internal/pgtest) or
// dynalite (internal/dynatest), killed with SIGKILL under load and started
// again on the same table, and a backend stopped and restarted under load.
//
// The crash tests count, per key, the units the server acknowledged as
// consumed before the kill (allowed THROTTLE.CHECK replies the client
// read) and compare them with what THROTTLE.PEEK reports after the
// restart. In sync mode nothing acknowledged may be missing; in async mode
// the loss is measured and logged against the flush interval. The limits
// use a period of a year, so the budget a key regains while the test runs
// is a fraction of a unit, and the check allows exactly that regain.
//
// The load generator here is deliberately small: raw RESP over TCP, a
// fixed pipeline depth per connection, one goroutine per connection.
// BenchmarkPersist (set TK_PERSIST_BENCH=1) reuses it to compare
// throughput and latency of in-memory, async and sync servers.
package persisttests
