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
//	server --policies docs/...        more flags for the transcript's server (paths
//	                                  starting with docs/ are the repository's)
//	COMMAND arg ... [| notes]         a command, split like a shell line (quotes work);
//	                                  after " | ", comma-separated notes printed
//	                                  beside the reply's lines, one per line
//
// In a command, {N} stands for the N-th line of the previous reply (a number
// in it), so a transcript can hand a lease's reset time to THROTTLE.RETURN.
//
// Each transcript runs on a fresh server started with
// --enable-debug-command local, whose clock is frozen by DEBUG SET-CLOCK at
// one fixed instant (frozenAt) before the first command: times, TTLs and
// retry delays are the same on every run, and no window rolls over between
// two commands however slowly the machine runs them. Connection ids and the
// admission commands' ids count from a fresh server's start. So the README
// must equal the server's output exactly, nothing masked. Every
// docs/transcripts/*.txt must have its block in the README and every block
// its source. Run `go test ./internal/readme -update` to rewrite the README
// from a fresh server.
package readme
