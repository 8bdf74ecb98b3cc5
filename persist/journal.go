package persist

import (
	"encoding/binary"
	"errors"

	"github.com/throttlekit/throttlekit-server/engine"
)

// journalV1 is the leading byte of a journal row's records in the format
// appendJournal writes.
const journalV1 = 1

// errJournal is the error of decoding bytes that are not a journal row.
var errJournal = errors.New("malformed journal row")

// appendJournal appends the encoding of recs to dst and returns the
// extended buffer: the version byte, then per record the key's length
// (uvarint), the key, the kind (one byte) and A, B and ExpireAt (zig-zag
// varints). A tombstone is a record with the zero state and expiry. A
// record of a 16-byte key with small numbers takes about 30 bytes.
func appendJournal(dst []byte, recs []Record) []byte {
	dst = append(dst, journalV1)
	for i := range recs {
		r := &recs[i]
		dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
		dst = append(dst, r.Key...)
		dst = append(dst, byte(r.State.Kind))
		dst = binary.AppendVarint(dst, r.State.A)
		dst = binary.AppendVarint(dst, r.State.B)
		dst = binary.AppendVarint(dst, r.ExpireAt)
	}
	return dst
}

// decodeJournal calls fn for each record of a journal row, in the order
// they were encoded. fn's key aliases buf. It returns errJournal when buf
// is not a complete row in a known format; fn may have been called for
// the records before the damage.
func decodeJournal(buf []byte, fn func(key []byte, st engine.State, exp int64)) error {
	if len(buf) == 0 || buf[0] != journalV1 {
		return errJournal
	}
	buf = buf[1:]
	for len(buf) > 0 {
		n, w := binary.Uvarint(buf)
		if w <= 0 || n > uint64(len(buf)-w) {
			return errJournal
		}
		buf = buf[w:]
		key := buf[:n:n]
		buf = buf[n:]
		if len(buf) == 0 {
			return errJournal
		}
		var st engine.State
		st.Kind = engine.Kind(buf[0])
		buf = buf[1:]
		var exp int64
		for _, v := range [...]*int64{&st.A, &st.B, &exp} {
			x, w := binary.Varint(buf)
			if w <= 0 {
				return errJournal
			}
			*v = x
			buf = buf[w:]
		}
		fn(key, st, exp)
	}
	return nil
}
