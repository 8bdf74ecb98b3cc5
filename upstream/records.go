package upstream

import (
	"strconv"
	"sync"
)

// The records of the admission operations (concurrency slots, penalty
// box, reservations) live on the upstream beside the user key, in keys of
// their own:
//
//	{T}s:<key>                               hash: the key's held slots
//	{T}b:<key>                               string: the key's ban record
//	{T}r:<seq>.<algo>.<limit>.<period>:<key>  string: one open reservation
//
// T is a three-character tag ([0-9a-zA-Z]) whose hash slot is the user
// key's own (Slot(T) == Slot(key)), so a script given the user key and
// its records in KEYS touches one hash slot and a Redis Cluster routes it
// to one master, whatever the user key looks like: with or without a hash
// tag of its own, or with braces that are no hash tag ("a}b", "{}x"),
// which wrapping the key in braces would not keep on its slot. The kind
// letter sits at a fixed offset and the reservation id holds no ':', so
// two records of different user keys never share a name.

// tagAlphabet is the characters of the slot tags.
const tagAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// slotTags returns, for every hash slot, the first three-character tag
// (in tagAlphabet order) that hashes to it; the 62^3 tags cover all 16384
// slots (TestSlotTags). It is computed once, on first use, in about a
// millisecond, and never changes.
var slotTags = sync.OnceValue(func() *[NumSlots][3]byte {
	var t [NumSlots][3]byte
	var seen [NumSlots]bool
	for _, a := range []byte(tagAlphabet) {
		for _, b := range []byte(tagAlphabet) {
			for _, c := range []byte(tagAlphabet) {
				s := crc16(string([]byte{a, b, c})) % NumSlots
				if !seen[s] {
					seen[s], t[s] = true, [3]byte{a, b, c}
				}
			}
		}
	}
	return &t
})

// recordKey returns the name of key's record of the given kind ('s', 'b',
// or 'r' with id the reservation's id text): "{T}<kind>:[id:]<key>".
func recordKey(kind byte, key, id string) string {
	tag := slotTags()[Slot(key)]
	b := make([]byte, 0, 8+len(id)+len(key))
	b = append(b, '{', tag[0], tag[1], tag[2], '}', kind, ':')
	if id != "" {
		b = append(append(b, id...), ':')
	}
	return string(append(b, key...))
}

// reservationText is a reservation's id text: "seq.algo.limit.period".
func reservationText(seq int64, algo, limit, period int64) string {
	b := strconv.AppendInt(nil, seq, 10)
	b = strconv.AppendInt(append(b, '.'), algo, 10)
	b = strconv.AppendInt(append(b, '.'), limit, 10)
	return string(strconv.AppendInt(append(b, '.'), period, 10))
}
