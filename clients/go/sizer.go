package throttlekit

import "math"

// Sizer chooses the batch of each lease a Limiter in ModeLeased takes, and
// learns from what became of the credits. The Limiter keeps one SizerState
// per key inside its own entry and calls the Sizer under that key's lock,
// so a Sizer needs no locking of its own and must not block.
//
// Safety never depends on the Sizer: the server grants at most the window's
// remaining credits whatever the batch, and the Limiter clamps every batch
// to [1, limit] and raises it to the cost of the request that needs it.
type Sizer interface {
	// Batch returns the batch for the next lease of a key.
	Batch(st *SizerState, limit int64) int64
	// Observe reports a key's finished window.
	Observe(st *SizerState, w Window)
}

// SizerState is one key's learning state. The zero value is a key the
// Sizer has not seen; a Limiter with LimiterOptions.Batch set starts new
// keys at that batch.
type SizerState struct {
	LogBatch float64 // natural log of the current batch
	SumSq    float64 // AdaGrad's sum of squared gradients
	Started  bool    // LogBatch holds a value
}

// Window is what one key did in one finished window on this node.
type Window struct {
	Limit    int64 // the limit of the window
	Leases   int64 // lease round trips that granted credits
	Leased   int64 // credits granted
	Used     int64 // credits spent
	Stranded int64 // credits still held when the window ended (void, never returned)
	Returned int64 // credits given back with THROTTLE.RETURN
}

// FixedSizer leases the same batch every time.
type FixedSizer int64

// Batch returns the fixed batch.
func (f FixedSizer) Batch(*SizerState, int64) int64 { return int64(f) }

// Observe does nothing.
func (FixedSizer) Observe(*SizerState, Window) {}

// AdaptiveSizer learns each key's batch online with AdaGrad on the
// logarithm of the batch, trading round trips against stranded credits
// (the economic-order-quantity trade).
//
// A window's cost is RoundTripCost per lease plus one per stranded credit
// (a credit leased and void at the window's end is a request some node had
// to deny). For demand D per window and batch b the leases are about D/b
// and the stranded credits about b/2, so the cost is smallest near
// b* = sqrt(2*RoundTripCost*D). With x = ln b both parts are observable:
// d(leases)/dx = -leases and d(stranded)/dx ≈ stranded, so the gradient
// of a finished window is stranded - RoundTripCost*leases, normalised into
// [-1, 1]. AdaGrad steps x by -Rate*g/sqrt(sum g²) and clamps it to
// [0, ln limit]. The sum is capped at MaxSumSq so that steps never shrink
// below Rate/sqrt(MaxSumSq): demand drifts and the learner must follow.
//
// Cost: a few floating-point operations per key and window, and one exp
// per lease; the state is three words kept in the Limiter's entry.
type AdaptiveSizer struct {
	RoundTripCost float64 // a round trip's cost in stranded credits; 0 means 2
	Rate          float64 // step size in ln units; 0 means 1
	MaxSumSq      float64 // cap of the AdaGrad sum; 0 means 100
	Initial       int64   // first batch of a key not started; 0 means ceil(sqrt(limit))
}

// Batch returns round(e^LogBatch), or the initial batch for a new key.
func (a *AdaptiveSizer) Batch(st *SizerState, limit int64) int64 {
	if !st.Started {
		b := a.Initial
		if b <= 0 {
			b = int64(math.Ceil(math.Sqrt(float64(limit))))
		}
		st.LogBatch = math.Log(float64(max(1, min(b, limit))))
		st.Started = true
	}
	return int64(math.Round(math.Exp(st.LogBatch)))
}

// Observe takes one AdaGrad step from the finished window w.
func (a *AdaptiveSizer) Observe(st *SizerState, w Window) {
	if w.Leases == 0 && w.Stranded == 0 {
		return // nothing leased: no evidence either way
	}
	if !st.Started {
		a.Batch(st, w.Limit)
	}
	c := a.RoundTripCost
	if c <= 0 {
		c = 2
	}
	rate := a.Rate
	if rate <= 0 {
		rate = 1
	}
	maxSq := a.MaxSumSq
	if maxSq <= 0 {
		maxSq = 100
	}
	up := c * float64(w.Leases)
	down := float64(w.Stranded)
	g := (down - up) / (down + up)
	st.SumSq = min(st.SumSq+g*g, maxSq)
	if st.SumSq == 0 {
		return
	}
	x := st.LogBatch - rate*g/math.Sqrt(st.SumSq)
	st.LogBatch = max(0, min(x, math.Log(float64(max(w.Limit, 1)))))
}
