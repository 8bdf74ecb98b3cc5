// Package slowlog keeps the entries of SLOWLOG: the most recent commands
// that ran longer than a threshold, with their arguments cut as Redis 7
// cuts them, in a ring of bounded length.
//
// # Shape of an entry
//
// An entry holds what SLOWLOG GET returns for it in Redis 7: a unique,
// increasing id; the Unix time (seconds) at which the command was logged;
// its duration in microseconds; its arguments; and the client's address
// and name. Arguments are cut as Redis's slowlogCreateEntry cuts them: at
// most MaxArgs (32) are kept, the last kept one replaced by "... (N more
// arguments)" when there were more, and each argument longer than
// MaxArgLen (128) bytes keeps its first 128 bytes followed by "... (N more
// bytes)". The cut copies, so an entry never refers to a caller's buffer.
//
// # Costs
//
// The log is shared by every event loop: Add takes a mutex and copies the
// cut arguments (one allocation per argument kept, plus the entry's slice),
// so it is meant to run only for commands that crossed the threshold, never
// for every command. Deciding whether a command is slow is the caller's
// job (see server/cmd_slowlog.go for how the server times commands). Get,
// Len and Reset take the same mutex. Entries past MaxLen are dropped oldest
// first; shrinking MaxLen drops the oldest at once.
package slowlog

import (
	"strconv"
	"sync"
)

// Limits of an entry, as Redis 7 defines them (SLOWLOG_ENTRY_MAX_ARGC and
// SLOWLOG_ENTRY_MAX_STRING).
const (
	MaxArgs   = 32  // arguments kept per entry, the last one possibly a "more arguments" note
	MaxArgLen = 128 // bytes kept of one argument before the "more bytes" note
)

// Defaults of the settings, as Redis's.
const (
	DefaultSlowerThanUs = 10000 // slowlog-log-slower-than, microseconds
	DefaultMaxLen       = 128   // slowlog-max-len
)

// Entry is one logged command.
type Entry struct {
	ID         int64    // unique and increasing, from 0; RESET does not restart it
	Time       int64    // Unix seconds when it was logged
	DurationUs int64    // how long the command took, microseconds
	Args       [][]byte // the arguments, cut (see the package doc)
	Addr       string   // the client's address, ip:port
	Name       string   // the client's name, "" if none
}

// Log is a ring of the most recent entries. The zero Log keeps nothing
// until SetMaxLen; New returns one with a length bound. It is safe for
// concurrent use.
type Log struct {
	mu     sync.Mutex
	ring   []Entry // oldest at start, up to maxLen
	start  int     // index of the oldest entry in ring when full
	maxLen int
	nextID int64
}

// New returns a Log that keeps at most maxLen entries (0: none).
func New(maxLen int) *Log {
	l := &Log{}
	l.SetMaxLen(maxLen)
	return l
}

// Cut returns a copy of args cut as Redis 7 cuts a slow log entry's
// arguments (see the package doc).
func Cut(args [][]byte) [][]byte {
	n := len(args)
	if n > MaxArgs {
		n = MaxArgs
	}
	out := make([][]byte, n)
	for j := 0; j < n; j++ {
		if n != len(args) && j == n-1 {
			out[j] = []byte("... (" + strconv.Itoa(len(args)-n+1) + " more arguments)")
			continue
		}
		a := args[j]
		if len(a) > MaxArgLen {
			c := make([]byte, 0, MaxArgLen+32)
			c = append(c, a[:MaxArgLen]...)
			c = append(c, "... ("...)
			c = strconv.AppendInt(c, int64(len(a)-MaxArgLen), 10)
			c = append(c, " more bytes)"...)
			out[j] = c
			continue
		}
		out[j] = append([]byte(nil), a...)
	}
	return out
}

// Add logs a command: its arguments (cut and copied), when it was logged
// (Unix seconds), how long it took (µs), and its client. It returns the
// entry's id, or -1 when the log keeps no entries.
func (l *Log) Add(unixSec, durationUs int64, args [][]byte, addr, name string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxLen <= 0 {
		return -1
	}
	e := Entry{ID: l.nextID, Time: unixSec, DurationUs: durationUs, Args: Cut(args), Addr: addr, Name: name}
	l.nextID++
	if len(l.ring) < l.maxLen {
		l.ring = append(l.ring, e)
		return e.ID
	}
	l.ring[l.start] = e
	l.start = (l.start + 1) % len(l.ring)
	return e.ID
}

// Get returns up to count entries, newest first; a negative count returns
// every entry.
func (l *Log) Get(count int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.ring)
	if count >= 0 && count < n {
		n = count
	}
	out := make([]Entry, n)
	for i := 0; i < n; i++ {
		out[i] = l.ring[(l.start+len(l.ring)-1-i)%len(l.ring)]
	}
	return out
}

// Len returns the number of entries held.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ring)
}

// Reset drops every entry. Ids keep increasing, as in Redis.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring = l.ring[:0]
	l.start = 0
}

// SetMaxLen bounds the entries kept, dropping the oldest beyond the new
// bound; 0 or less keeps none.
func (l *Log) SetMaxLen(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = max(n, 0)
	ordered := make([]Entry, 0, min(len(l.ring), n))
	for i := max(len(l.ring)-n, 0); i < len(l.ring); i++ {
		ordered = append(ordered, l.ring[(l.start+i)%len(l.ring)])
	}
	l.ring, l.start, l.maxLen = ordered, 0, n
}

// MaxLen returns the bound SetMaxLen or New set.
func (l *Log) MaxLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxLen
}
