package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Dist names a key distribution.
type Dist string

// Key distributions.
const (
	Uniform Dist = "uniform" // every key of the keyspace equally likely
	Zipf    Dist = "zipf"    // key i drawn with probability proportional to 1/(1+i)^s
)

// ZipfS is the skew exponent of the Zipf distribution (s in 1/(1+i)^s). 1.1
// makes a handful of keys hot while the tail still touches most of a large
// keyspace, the shape of per-user traffic.
const ZipfS = 1.1

// KeyGen draws key indexes in [0, N). A KeyGen is not safe for concurrent
// use: give each connection its own (see NewKeyGen).
type KeyGen struct {
	n    uint64
	rng  *rand.Rand
	zipf *rand.Zipf
}

// NewKeyGen returns a generator of indexes in [0, n) following dist, seeded
// with seed so runs are reproducible. n must be at least 1.
func NewKeyGen(dist Dist, n int, seed uint64) (*KeyGen, error) {
	if n < 1 {
		return nil, fmt.Errorf("loadgen: keyspace must be >= 1, got %d", n)
	}
	g := &KeyGen{n: uint64(n), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	switch dist {
	case Uniform, "":
	case Zipf:
		if n > 1 {
			g.zipf = rand.NewZipf(g.rng, ZipfS, 1, uint64(n-1))
		}
	default:
		return nil, fmt.Errorf("loadgen: unknown key distribution %q", dist)
	}
	return g, nil
}

// Next returns the next key index.
func (g *KeyGen) Next() uint64 {
	if g.n == 1 {
		return 0
	}
	if g.zipf != nil {
		return g.zipf.Uint64()
	}
	return g.rng.Uint64N(g.n)
}

// AppendKey appends prefix followed by the decimal index i: the key name the
// workloads use for index i.
func AppendKey(dst []byte, prefix string, i uint64) []byte {
	dst = append(dst, prefix...)
	return strconv.AppendUint(dst, i, 10)
}

// AppendPaddedKey is AppendKey with the decimal index zero-padded to width
// digits (an index with more digits is written whole).
func AppendPaddedKey(dst []byte, prefix string, i uint64, width int) []byte {
	dst = append(dst, prefix...)
	var d [20]byte
	n := len(strconv.AppendUint(d[:0], i, 10))
	for ; n < width; n++ {
		dst = append(dst, '0')
	}
	return strconv.AppendUint(dst, i, 10)
}
