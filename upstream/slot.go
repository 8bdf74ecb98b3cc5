package upstream

import "strings"

// NumSlots is the number of hash slots of a Redis Cluster.
const NumSlots = 16384

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag, modulo 16384. The hash tag is the part between
// the first '{' and the first '}' after it when that part is not empty, so
// "{tenant}:a" and "{tenant}:b" share a slot, and keys that must be used
// together in one call (MCHECK, RESET) get one tag.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % NumSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), bit by bit:
// a slot costs a few ns per key byte, far below the round trip it guards.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
