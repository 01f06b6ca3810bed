package faulttest_test

import (
	"context"
	"testing"
	"time"

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
