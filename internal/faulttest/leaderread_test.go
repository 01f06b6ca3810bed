package faulttest_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/faulttest"
)

// A read only the stream's leader answers (bus.LastMsgFromLeader: how a
// redelivered call looks for its result and its STARTED event), made
// while the leader is dead and no other is elected yet, is answered soon
// after the election: a request sent while nobody leads goes unanswered,
// and used to wait for its whole context (a worker's 10 s), keeping the
// worker's slots busy after the stream was back.
func TestClusterLeaderReadRidesOutAnElection(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx := t.Context()
	subject := c.Bus.Subjects.Event("default", "faulttest", "01J00000000000000000000001")
	_, err := c.Bus.JS.Publish(ctx, subject, []byte("stored"))
	require.NoError(t, err)
	stream := c.Bus.Config.EventsStream()
	for _, filter := range []string{subject, c.Bus.Subjects.EventsAnyDispatcher("default", "01J00000000000000000000001")} {
		victim, err := c.StreamLeader(ctx, stream, 30*time.Second)
		require.NoError(t, err)
		at := time.Now()
		c.KillNode(victim)
		// A context far longer than an election: the read must not need it.
		rctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		m, err := bus.LastMsgFromLeader(rctx, c.Bus.JS, c.Bus.Events, filter)
		cancel()
		answered := time.Since(at)
		require.NoError(t, err)
		require.Equal(t, "stored", string(m.Data))
		elected := c.Elections(ctx, []string{stream}, at)[stream]
		figure(t, "filter=%s elected_after=%s answered_after=%s", filter, elected.Round(time.Millisecond), answered.Round(time.Millisecond))
		require.Positive(t, elected, "a new leader was elected")
		require.Less(t, answered, elected+5*time.Second, "answered soon after the election")
		c.RestartNode(victim)
		c.WaitHealthy(2 * time.Minute)
	}
}

// A node that goes silent without closing its connections (SIGSTOP: a
// hung process or host, a partition) stops being asked to serve reads
// within seconds: its peers drop its routes after 2 unanswered PINGs 2 s
// apart (the configuration the Helm chart ships). With the servers'
// default for routes (a PING every 30 s at most, dropped after 60-90 s),
// freezing the leader of the cancel bucket made 40 of 64 pairs of gets
// hang throughout the 40 s measured — direct gets (KV reads, result and
// cancel look-ups) that any replica serves — and workers handed their
// calls back until the routes dropped.
func TestClusterFrozenPeerStopsServingReads(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx := t.Context()
	_, err := c.Bus.Cancels.Put(ctx, "default.x", []byte("{}"))
	require.NoError(t, err)
	// The frozen node leads the cancel bucket's stream, and is not the
	// one the test's client is connected to.
	own := c.NodeNamed(c.Bus.NC.ConnectedServerName())
	require.GreaterOrEqual(t, own, 0)
	stream := "KV_" + c.Bus.Config.CancelBucket()
	var victim *faulttest.Node
	for victim == nil {
		c.WaitHealthy(time.Minute)
		l, err := c.StreamLeader(ctx, stream, 30*time.Second)
		require.NoError(t, err)
		if l != own {
			victim = c.Nodes[l]
		} else {
			require.NoError(t, c.StepDown(ctx, stream))
		}
	}
	at := time.Now()
	require.NoError(t, victim.Proc.Signal(syscall.SIGSTOP))
	defer func() { _ = victim.Proc.Signal(syscall.SIGCONT) }()
	// Read for 30 s, every 10 ms, each pair of reads allowed 1 s; note the
	// last read that hung.
	var last time.Time
	hung, reads := 0, 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Since(at) < 30*time.Second {
		<-tick.C
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		// A key with no value: a call nobody cancelled, what a worker's
		// cancel look-up finds.
		_, err := c.Bus.Cancels.Get(gctx, "default.none")
		_, err2 := c.Bus.Cancels.Get(gctx, "default.x")
		cancel()
		reads += 2
		if !errors.Is(err, jetstream.ErrKeyNotFound) || err2 != nil {
			hung++
			last = time.Now()
		}
	}
	lastHung := time.Duration(0)
	if hung > 0 {
		lastHung = last.Sub(at)
	}
	figure(t, "frozen=%s reads=%d hung=%d last_hung_read_after=%s", victim.Name, reads, hung, lastHung.Round(time.Millisecond))
	require.Less(t, lastHung, 15*time.Second, "reads still hang on the frozen node")
}
