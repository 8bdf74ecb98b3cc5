package acl

import (
	"sync"
	"time"
)

// DefaultLogMaxLen is the default acllog-max-len.
const DefaultLogMaxLen = 128

// logGroupWindow is how close in time two identical denials must be to be
// counted in one entry, as Redis's ACL_LOG_GROUPING_MAX_TIME_DELTA.
const logGroupWindow = 60 * time.Second

// logScan is how many of the newest entries are searched for one to merge
// with, as in Redis.
const logScan = 10

// Context says where a denied command ran, as ACL LOG shows it.
type Context uint8

// Contexts of ACL LOG entries.
const (
	ContextTopLevel Context = iota
	ContextMulti
	ContextLua
	ContextModule
)

// String returns the ACL LOG name of the context.
func (c Context) String() string {
	switch c {
	case ContextTopLevel:
		return "toplevel"
	case ContextMulti:
		return "multi"
	case ContextLua:
		return "lua"
	case ContextModule:
		return "module"
	}
	return "unknown"
}

// Event is one denial to record in the ACL LOG.
type Event struct {
	Reason     Reason  // DeniedCommand, DeniedKey, DeniedChannel or DeniedAuth
	Context    Context // where the command ran
	Object     string  // command full name, key, channel, or the AUTH/HELLO word typed
	Username   string  // the connection's user, or the name tried for auth
	ClientInfo string  // CLIENT LIST line of the client
}

// LogEntry is one ACL LOG entry as ACL LOG returns it.
type LogEntry struct {
	Count                int64
	Reason               Reason
	Context              Context
	Object               string
	Username             string
	AgeSeconds           float64 // time since the last update, at the time of the listing
	ClientInfo           string
	EntryID              int64
	TimestampCreated     int64 // Unix milliseconds
	TimestampLastUpdated int64 // Unix milliseconds
}

// Log is the bounded ACL LOG, newest entry first. Denials are rare, so it
// takes a mutex; it never reads the clock: callers pass the time.
type Log struct {
	mu      sync.Mutex
	max     int
	entries []LogEntry // newest first
	nextID  int64
}

// NewLog returns an empty log keeping at most maxLen entries.
func NewLog(maxLen int) *Log { return &Log{max: max(maxLen, 0)} }

// SetMaxLen sets acllog-max-len. As in Redis, a shorter limit trims the log
// at the next added entry.
func (l *Log) SetMaxLen(n int) {
	l.mu.Lock()
	l.max = max(n, 0)
	l.mu.Unlock()
}

// Add records ev at time now. If one of the 10 newest entries has the same
// reason, context, object and user and was updated within 60 s of now, its
// count is bumped, its client info and update time replaced, and it moves
// to the front; otherwise a new entry with the next entry id is added and
// the oldest entries beyond the limit are dropped. Cost: O(10) comparisons;
// the slice shifts on insert (the log is small and denials rare).
func (l *Log) Add(ev Event, now time.Time) {
	ms := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < logScan; i++ {
		e := &l.entries[i]
		d := time.Duration(ms-e.TimestampLastUpdated) * time.Millisecond
		if d < 0 {
			d = -d
		}
		if e.Reason != ev.Reason || e.Context != ev.Context || d > logGroupWindow ||
			e.Object != ev.Object || e.Username != ev.Username {
			continue
		}
		m := *e
		m.Count++
		m.ClientInfo = ev.ClientInfo
		m.TimestampLastUpdated = ms
		copy(l.entries[1:i+1], l.entries[:i])
		l.entries[0] = m
		return
	}
	e := LogEntry{Count: 1, Reason: ev.Reason, Context: ev.Context, Object: ev.Object,
		Username: ev.Username, ClientInfo: ev.ClientInfo, EntryID: l.nextID,
		TimestampCreated: ms, TimestampLastUpdated: ms}
	l.nextID++
	l.entries = append(l.entries, LogEntry{})
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
	if len(l.entries) > l.max {
		clear(l.entries[l.max:])
		l.entries = l.entries[:l.max]
	}
}

// Entries returns up to count entries, newest first, as ACL LOG [count]
// (count < 0 means 0, as in Redis; the command's default is 10), with
// AgeSeconds computed at now.
func (l *Log) Entries(count int, now time.Time) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	count = min(max(count, 0), len(l.entries))
	out := make([]LogEntry, count)
	copy(out, l.entries)
	ms := now.UnixMilli()
	for i := range out {
		out[i].AgeSeconds = float64(ms-out[i].TimestampLastUpdated) / 1000
	}
	return out
}

// Len returns the number of entries.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Reset empties the log (ACL LOG RESET). Entry ids keep counting up.
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// DenialEvent builds the ACL LOG event for a denied Check verdict: the
// object is the command's full name for a command denial, else the refused
// key args[v.Pos].
func (u *User) DenialEvent(cmd, sub int, args [][]byte, v Verdict, ctx Context, clientInfo string) Event {
	ev := Event{Reason: v.Reason, Context: ctx, Username: u.name, ClientInfo: clientInfo}
	if v.Reason == DeniedCommand {
		ev.Object = u.CommandName(cmd, sub)
	} else if uint(v.Pos) < uint(len(args)) {
		ev.Object = string(args[v.Pos])
	}
	return ev
}
