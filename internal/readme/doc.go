// Package readme keeps the transcripts in README.md true: every block of
// redis-cli output in the README is produced by running its commands against
// a freshly started server, and the test in this package fails when the
// README differs from what the server prints.
//
// A transcript's source is a file in docs/transcripts/NAME.txt; the README
// holds its rendering between the lines
//
//	<!-- transcript NAME -->
//	<!-- end transcript -->
//
// Source lines:
//
//	# comment                         ignored
//	style prompt|shell                how the following commands are shown
//	flags --no-raw -3 ...             redis-cli flags for the following commands
//	COMMAND arg ... [| notes]         a command, split like a shell line (quotes work);
//	                                  after " | ", comma-separated notes printed
//	                                  beside the reply's lines, one per line
//
// In a command, {N} stands for the N-th line of the previous reply (a number
// in it), so a transcript can hand a lease's reset time to THROTTLE.RETURN.
//
// Comparison masks what differs between two runs and nothing else: epoch
// times (integers of 13 digits or more), the 4th and 5th elements of a
// THROTTLE.* decision (reset_at_ms, retry_after_ms) and their RESP3 names,
// and connection ids. Run `go test ./internal/readme -update` to rewrite the
// README from a fresh server.
package readme
