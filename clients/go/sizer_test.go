package throttlekit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// windowLoss is the simulated cost of one window with demand d and batch
// b: c per lease plus one per stranded credit, the trade AdaptiveSizer
// learns. It also returns the Window the limiter would report.
func windowLoss(d, b, limit int64, c float64) (float64, throttlekit.Window) {
	if d == 0 {
		return 0, throttlekit.Window{Limit: limit}
	}
	n := (d + b - 1) / b
	stranded := n*b - d
	return c*float64(n) + float64(stranded), throttlekit.Window{Limit: limit, Leases: n, Leased: n * b, Used: d, Stranded: stranded}
}

// demand returns the demand of each window: a mean that drifts between
// phases, with uniform noise of ±50% around it.
func demand(seed uint64, means []float64, perPhase int) []int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []int64
	for _, m := range means {
		for range perPhase {
			out = append(out, int64(math.Round(m*(0.5+r.Float64()))))
		}
	}
	return out
}

// TestAdaptiveSizerRegret: against the best fixed batch chosen in hindsight
// the learner's total cost stays within a small factor, on stationary and
// on drifting demand; on drifting demand it may beat every fixed batch.
func TestAdaptiveSizerRegret(t *testing.T) {
	const limit = 1000
	const c = 2.0 // AdaptiveSizer's default round-trip cost
	for _, tc := range []struct {
		name  string
		means []float64
		ratio float64 // allowed learner/best-fixed cost
	}{
		{"stationary-low", []float64{40}, 1.25},
		{"stationary-high", []float64{600}, 1.25},
		{"drift-up", []float64{20, 80, 300, 900}, 1.25},
		{"drift-down", []float64{900, 300, 80, 20}, 1.25},
		{"seesaw", []float64{30, 700, 30, 700, 30, 700}, 1.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				ds := demand(seed, tc.means, 400)
				var sz throttlekit.AdaptiveSizer
				var st throttlekit.SizerState
				var learner float64
				for _, d := range ds {
					b := sz.Batch(&st, limit)
					if b < 1 || b > limit {
						t.Fatalf("batch %d outside [1, %d]", b, limit)
					}
					loss, w := windowLoss(d, b, limit, c)
					learner += loss
					sz.Observe(&st, w)
				}
				best, bestB := math.Inf(1), int64(0)
				for b := int64(1); b <= limit; b++ {
					var sum float64
					for _, d := range ds {
						l, _ := windowLoss(d, b, limit, c)
						sum += l
					}
					if sum < best {
						best, bestB = sum, b
					}
				}
				r := learner / best
				if seed == 1 {
					t.Logf("%s: learner %.0f, best fixed batch %d costs %.0f, ratio %.3f", tc.name, learner, bestB, best, r)
				}
				if r > tc.ratio {
					t.Fatalf("seed %d: learner cost %.0f is %.2fx the best fixed batch %d (%.0f), want <= %.2fx", seed, learner, r, bestB, best, tc.ratio)
				}
			}
		})
	}
}

// TestSizerBounds: whatever it observes, the learner's batch stays in
// [1, limit].
func TestSizerBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, limit := range []int64{1, 2, 10, 1000, 1 << 40} {
		var sz throttlekit.AdaptiveSizer
		var st throttlekit.SizerState
		for range 2000 {
			b := sz.Batch(&st, limit)
			if b < 1 || b > limit {
				t.Fatalf("limit %d: batch %d", limit, b)
			}
			w := throttlekit.Window{Limit: limit, Leases: r.Int64N(50), Stranded: r.Int64N(max(b, 1) + 1)}
			if r.IntN(4) == 0 {
				w.Leases, w.Stranded = 0, 0
			}
			sz.Observe(&st, w)
		}
	}
	if b := throttlekit.FixedSizer(7).Batch(nil, 100); b != 7 {
		t.Fatalf("FixedSizer(7) = %d", b)
	}
}
