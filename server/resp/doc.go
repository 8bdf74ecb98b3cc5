// Package resp is the Redis protocol codec of throttlekit-server: it turns
// bytes into commands, with the limits and the error wording of
// redis-server, and writes RESP2 and RESP3 replies into a caller's buffer.
// It holds no connection state and knows no commands; besides the standard
// library it imports only github.com/tidwall/redcon.
//
// # Reading commands
//
// A client sends either multibulk frames ("*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
// or inline commands ("ECHO hi\r\n", split with redis-server's quoting
// rules). Parser.Next reads one command at the start of a byte slice and
// returns how many bytes it took, its arguments, or a protocol error.
//
// Every header is checked before any length in it is trusted: an argument
// count must not exceed Limits.MaxArgs, a bulk length must be a
// non-negative number without sign or leading zero and must not exceed
// Limits.MaxBulkLen, each header and each bulk ends in CRLF, and a header or
// inline line may not grow past 64 KiB without its line ending. A client
// that has not authenticated yet is held to 10 arguments of 16 KiB. Each
// violation is an *Error with a stable ErrorCode whose text is the one
// redis-server sends ("Protocol error: invalid bulk length"); the server
// answers it and closes the connection.
//
// # Frames that arrive in pieces
//
// A large frame arrives over many reads. Parsing it from its start on every
// read would cost O(frame) per read and O(frame²/read size) in all: a 16 MiB
// argument in 64 KiB reads is 256 rescans. Instead the connection keeps a
// Pending, a few words that record how far the frame was validated: the
// offset of the next header, the arguments seen, the length of the bulk
// being received and how far the current line was searched for its line
// ending. The next call resumes there, so a frame costs O(frame) in all
// plus O(1) per read, and Pending.Need tells the caller how many bytes the
// frame needs at least, so it can size its buffer and skip calls that
// cannot complete the frame. Limits.MaxQueryBuffer bounds that need: a
// frame that announces more, or has buffered more without completing, is
// ErrQueryBuffer rather than memory the server commits to.
//
// The price of resuming is a contract: the caller passes the pending frame
// again from its first byte, followed by what has arrived since (typically
// it keeps the frame in a buffer of its own while it is incomplete).
//
// # What redcon does, and what it does not
//
// A frame that is whole in the buffer when Next sees it, with plain
// headers (the common case: a command, or a pipeline of them, in one
// read), is read once: the fast path validates each header and slices
// the argument after it in the same pass (wholeFrame), since a second
// pass over the headers costs a short command a visible share of its
// work (bench/README.md has the instruction counts).
//
// A frame that arrives in pieces, or has a header the fast path leaves to
// the general one, is read twice, by two parsers with different jobs.
// Ours reads every header as it arrives: it checks the count and each
// bulk length against the Limits, rejects what redis-server rejects (a
// sign, a leading zero, a negative bulk length, a missing CRLF) and
// records in the Pending how far it got. Only once the whole frame is in
// the buffer and every header in it has passed does
// redcon.ReadNextCommand read it, in one pass over its headers that skips
// the data, and slice it into the arguments Next returns. The fast path
// slices exactly as redcon does on every frame it accepts
// (FuzzRedconAgrees compares them). The order matters: redcon bounds no length, accepts "+5" and "05", and
// reads before the data on a negative bulk length (it panics on
// "*1\r\n$-99\r\n" in 1.6.4), so it only
// ever sees frames our validation passed (TestValidatorGuardsRedcon), on
// which it agrees with an independent reader byte for byte
// (FuzzRedconAgrees). What redcon cannot do stays here: resuming a frame
// at linear cost instead of rereading it from its start on every read,
// the limits checked before anything is sized by an announced length,
// redis-server's error wording, and inline commands, which redcon splits
// differently from redis-server (no \xHH escapes, a quote inside a word
// is an error) and with an allocation per argument.
//
// # Allocation
//
// The Parser reuses its argument slice and its scratch space for unescaped
// inline arguments, so steady-state parsing allocates nothing: the slice is
// sized to a frame's count before the arguments are appended to it (the
// fast path sizes it only for a count the bytes at hand could hold).
// Arguments alias the input and are valid until the next call; each is
// capped at its length, so appending to one never overwrites the input. An argument slice
// grown past a few thousand entries by a huge command is dropped on the
// next call rather than kept. Errors allocate: they end the connection.
//
// # Writing replies
//
// The Append functions write one value into a caller's buffer: AppendInt,
// AppendBulk, AppendArray and the like, plus the types that differ between
// protocols, which take resp3: null ("_" or "$-1"/"*-1"), map ("%n" or a
// flat array of 2n), set ("~n" or an array), double ("," or a bulk),
// boolean ("#t" or an integer) and verbatim string ("=n\r\ntxt:..." or a
// bulk). The RESP2 values are written by redcon's Append functions
// (bulk strings, "$-1", "+OK", simple strings), except integers and array
// headers, which make up most of a decision reply: this package writes
// their digits eight at a time with word arithmetic and one store per
// eight (putHeader), without strconv's buffer of its own and copy, into a
// fixed-size window of the buffer's spare room whose offsets are masked to
// its size, so that the compiler checks no bound per store. A reply made
// of integers (a decision: a header and five integers, named in RESP3) is
// one call, AppendIntFields, with one capacity check for the whole reply
// and no call per value: in Go a call spills every live register, which
// cost more than the digits (bench/README.md has the instruction counts).
// All of them are checked byte for byte against a reference writer by
// TestRedconWritersMatch and TestAppendIntFieldsMatches; the RESP3 types,
// which redcon does not write, and the error line, which redcon takes as
// one string where ours takes a code and a message without joining them,
// are written here. Simple strings and error lines have CR and LF replaced
// by spaces: a simple string holding them is written here too, since
// redcon would copy it to replace them. Nothing there allocates beyond
// growing the buffer (TestWritersDoNotAllocate).
package resp
