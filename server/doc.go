// Package server is the RESP front end of throttlekit-server: a gnet event
// loop that parses Redis protocol commands, runs the THROTTLE.* and
// CL.THROTTLE commands against a shard.Store, and answers the handshake and
// admin commands that Redis clients send.
//
// # One batch
//
// gnet calls OnTraffic when a connection has input. The server peeks at the
// whole inbound buffer, reads the clock once, and answers every complete
// command in it, appending each reply to the event loop's reply buffer; a
// partial command stays in gnet's buffer for the next read. The replies of
// the batch leave in one Conn.Write: gnet writes immediately when its
// outbound buffer is empty, so a write per reply would cost a system call per
// command. QUIT and protocol errors close the connection after that write.
//
// # Parsing
//
// A multibulk frame ("*<n>\r\n$<len>\r\n...") is first scanned by
// scanMultibulk, which checks every header against the limits (argument count
// <= MaxArgs, bulk length <= ProtoMaxBulkLen, no negative or malformed
// lengths, CRLF after each bulk; tighter limits before authentication, as
// Redis applies them) and finds the frame's end without copying. Only a
// frame that passed is handed to redcon.ReadNextCommand, which slices it into
// arguments. A line that does not start with '*' is an inline command, split
// with Redis's quoting rules. Violations answer "-ERR Protocol error: ..."
// and close the connection; other connections are unaffected.
//
// # Commands and the hot path
//
// Command names are looked up case-insensitively in a fixed table by
// lower-casing into a stack buffer (no allocation). Each loop owns an op
// value implementing shard.Transform; THROTTLE.CHECK fills it with the parsed
// engine.Limit and hands a pointer to Store.Apply, which runs the engine under
// the key's shard lock. Decisions are written with redcon's Append helpers
// (RESP2 arrays) or as RESP3 maps when the connection said HELLO 3. Once a
// key exists, a command allocates nothing: BenchmarkDispatch measures it.
//
// # Counters
//
// Each loop counts commands, decisions, errors, bytes and latency in plain
// integers and adds them to its atomic counters once per batch; Stats folds
// the loops together. The latency of a command is the time from the start of
// its batch to the moment the batch's replies are ready to write (a second clock read per batch,
// not per command).
//
// # Connections
//
// MaxClients bounds open connections (the extra ones get "-ERR max number
// of clients reached" and are closed). A client whose queued replies exceed
// OutputBufferLimit is closed. With IdleTimeout set, a ticker asks every loop
// to close its connections idle for longer. Shutdown stops the listener,
// lets the loops finish the batch in hand, flushes pending replies and closes
// every connection.
package server
