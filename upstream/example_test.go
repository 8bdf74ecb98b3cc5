package upstream_test

import (
	"context"
	"fmt"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/upstream"
)

// Checks 10 requests per second on a Redis Cluster, and two limits of one
// tenant together: the hash tag {acme} puts both keys on one slot.
func ExampleDial() {
	c, err := upstream.Dial("redis-cluster://10.0.0.1:6379,10.0.0.2:6379", upstream.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	perSecond, _ := engine.NewLimit(engine.KindGCRA, 10, 1e9, 0)
	perDay, _ := engine.NewLimit(engine.KindFixed, 10000, 86400e9, 0)
	d, err := c.Check(ctx, "{acme}:api", perSecond, 1)
	switch upstream.CodeOf(err) {
	case 0:
		fmt.Println("allowed:", d.Allowed == 1, "retry after ms:", d.RetryAfter)
	case upstream.CodeUnavailable:
		fmt.Println("upstream down:", err)
		return
	default:
		fmt.Println(err)
		return
	}
	m, err := c.MCheck(ctx, []upstream.Rule{{Key: "{acme}:api", Limit: perSecond}, {Key: "{acme}:day", Limit: perDay}}, 1)
	if err == nil {
		fmt.Println("both allowed:", m.Allowed)
	}
}
