package faulttest

import (
	"context"
	"time"
)

// KillDispatcher ends the dispatcher as a kill -9 of its process would,
// as far as the rest of the system sees: its NATS connection is closed at
// once, without a drain, so publishes and acks in flight are lost, its
// consumers and its archiver's lease are left to expire, and nothing it
// meant to do at shutdown reaches the server. Then, since it runs in the
// test process, what it had started is stopped (within stopWithin; its
// Stop can reach nothing any more) so that its goroutines end, as a
// killed process's would. The dispatcher's callers get errors until
// StartDispatcher.
func (c *Cluster) KillDispatcher(stopWithin time.Duration) {
	c.t.Helper()
	c.dispMu.RLock()
	nc, d, reg, policies, watchdog := c.nc, c.Dispatcher, c.Registry, c.Policies, c.Watchdog
	c.dispMu.RUnlock()
	nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	for name, err := range map[string]error{"dispatcher": d.Stop(ctx), "policies": policies.Stop(ctx), "registry": reg.Stop(ctx), "watchdog": watchdog.Stop(ctx)} {
		if err != nil {
			c.t.Logf("faulttest: killed dispatcher: stopping its %s: %v", name, err)
		}
	}
}

// StartDispatcher starts a new dispatcher in the test process after
// KillDispatcher: a new connection, the same layout, configuration,
// name, signing key and archive store, as a restarted replica.
func (c *Cluster) StartDispatcher() {
	c.t.Helper()
	c.startDispatcher(c.busCfg, c.log)
}

// RestartDispatcher is KillDispatcher then StartDispatcher; it returns
// how long the cluster had no dispatcher.
func (c *Cluster) RestartDispatcher() time.Duration {
	c.t.Helper()
	start := time.Now()
	c.KillDispatcher(30 * time.Second)
	c.StartDispatcher()
	return time.Since(start)
}
