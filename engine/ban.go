package engine

// The penalty box (THROTTLE.CHECK ... BAN threshold duration).
//
// A key that is denied Threshold times within Window is banned for
// Duration: while banned, its checks are denied without running the
// algorithm, so a banned client consumes nothing and learns only how long
// the ban has left. The record is a State of its own kind, kept beside the
// key's algorithm state (server/ keeps it outside the user keyspace):
//
//	KindBanCount  A = denials counted, B = end of the counting window (ns)
//	KindBanned    A = end of the ban (ns since the epoch)
//
// The counting window opens at the first denial and lasts Window; a
// denial after it ends starts a new count. Both records expire on their
// own (the ttl returned), so an idle key costs nothing once they pass.

// Record kinds of the penalty box. They are never the Kind of a limit's
// state and never stored with one.
const (
	KindBanCount Kind = 0x40 + iota // denials counted in a window
	KindBanned                      // banned until A
)

// Ban is a validated penalty-box configuration.
type Ban struct {
	Threshold int64 // denials within Window that trigger a ban
	Window    int64 // ns; the limit's period
	Duration  int64 // ns a ban lasts
}

// NewBan validates a penalty-box configuration: threshold, window (the
// limit's period) and duration must be positive; ok is false otherwise.
func NewBan(threshold, window, duration int64) (b Ban, ok bool) {
	if threshold <= 0 || duration <= 0 || window <= 0 {
		return Ban{}, false
	}
	return Ban{Threshold: threshold, Window: window, Duration: duration}, true
}

// BannedFor returns the ns left of the ban s records at now, 0 if none.
func BannedFor(s State, now int64) int64 {
	if s.Kind != KindBanned || s.A <= now {
		return 0
	}
	return s.A - now
}

// Deny counts one denial in s at now and returns the next record and its
// ttl; banned reports that this denial started a ban. A record that is
// already a live ban is returned unchanged.
func (b *Ban) Deny(s State, now int64) (next State, ttl int64, banned bool) {
	if left := BannedFor(s, now); left > 0 {
		return s, left, false
	}
	count, end := int64(1), satAdd(now, b.Window)
	if s.Kind == KindBanCount && now < s.B {
		count, end = s.A+1, s.B
	}
	if count >= b.Threshold {
		until := satAdd(now, b.Duration)
		return State{A: until, Kind: KindBanned}, until - now, true
	}
	return State{A: count, B: end, Kind: KindBanCount}, end - now, false
}
