// Package attack drives the real throttlekit-server binary, over TCP, with
// the inputs a hostile or broken client sends: a 64 MiB argument, a command
// of a million arguments, a million pipelined commands whose replies are
// never read, a MONITOR that never reads, more connections than
// maxclients, thousands of connections dropped mid-command, a flood of
// unique keys, frames cut in the middle and left there, hundreds of
// uploads of a 64 MiB argument stopped after a megabyte, a command larger
// than the query buffer limit, oversized frames before AUTH, password
// guessing, and malformed frames whose replies must be redis-server's.
//
// Each test starts its own server process (built once per test binary by
// internal/testserver) so it can read the process's CPU time and resident
// memory from /proc, and where a comparison means something it starts a
// redis-server on the same input. Behaviour is asserted: the right reply,
// the right error, the connection closed, the key count bounded. Costs (CPU
// seconds, peak RSS, a control client's latency) are measured and logged;
// they are asserted only against bounds so generous that a slow or busy
// machine cannot trip them, because a test that fails on a loaded machine
// says nothing about the server.
//
// The tests need Linux (/proc) and, for the comparisons, redis-server on
// PATH; internal/testdeps skips them loudly when it is absent, or fails
// them when CI is set. -short floods three million keys instead of ten.
package attack
