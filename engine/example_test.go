package engine_test

import (
	"fmt"

	"github.com/throttlekit/throttlekit-server/engine"
)

func ExampleLimit_Check() {
	l, _ := engine.NewLimit(engine.KindGCRA, 10, 1e9, 2) // 10/s, burst 2
	var s engine.State
	now := int64(1_700_000_000_000_000_000)
	for i := 0; i < 3; i++ {
		var d engine.Decision
		s, d, _, _ = l.Check(s, now, 1)
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// 1 1 0
	// 1 0 0
	// 0 0 100
}

func ExampleCell_Throttle() {
	c, _ := engine.NewCell(15, 30, 60) // CL.THROTTLE key 15 30 60
	_, r, _, _ := c.Throttle(engine.State{}, 1_700_000_000_000_000_000, 1)
	fmt.Println(r.Limited, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter)
	// Output: 0 16 15 -1 2
}

func ExampleLimit_Lease() {
	l, _ := engine.NewLimit(engine.KindFixed, 10, 60e9, 0)
	now := int64(1_700_000_010_000_000_000)
	s, d, _, _ := l.Lease(engine.State{}, now, 4)
	_, back, _, _ := engine.Return(s, now, 1, d.ResetAt)
	fmt.Println(d.Allowed, d.Remaining, back)
	// Output: 4 6 1
}
