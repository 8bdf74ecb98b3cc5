package upstream

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// reloadOnFailure asks a cluster client to reload its slot map after a
// call that got no answer (CodeUnavailable: refused, timed out,
// CLUSTERDOWN, ...).
//
// go-redis follows MOVED and ASK replies, but a master that died cannot
// send one: its client keeps calling the dead address until the slot map
// is reloaded, which it does on its own only when the map is ten seconds
// old. After a failover the promoted replica would then wait up to that
// long for its first call. Reloading after a failure instead costs one
// CLUSTER SLOTS from a node that answers; go-redis runs it in the
// background, one at a time and at most one every 200 ms, so a dead
// cluster is not flooded with them. Service resumes with the first call
// after the map names the new master.
func (c *Client) reloadOnFailure(err error) {
	if err == nil || !c.cluster || CodeOf(classify(err)) != CodeUnavailable {
		return
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}
