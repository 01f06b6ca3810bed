package faulttest_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
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

// A read only the leader may answer never takes a lagging replica's word
// for "nothing stored". While a replicated stream has no leader, every
// member that knows it answers stream info from its own store; resolving
// a wildcard filter (a call's events on any dispatcher) from such an
// answer, a redelivery found no STARTED event that the leader had stored
// and ran a tool that is not safe to rerun a second time (2 such calls in
// one run of TestClusterLeaderKills). Here a member that missed the event
// (frozen while it was stored) is resumed while the leader is frozen,
// and read through a connection to it, so its stale answer comes first.
func TestClusterLeaderReadNeverAnswersFromALaggingReplica(t *testing.T) {
	c := faulttest.NewCluster3(t)
	started := time.Now()
	ctx := t.Context()
	stream := c.Bus.Config.EventsStream()
	own := c.NodeNamed(c.Bus.NC.ConnectedServerName())
	require.GreaterOrEqual(t, own, 0)
	leader := -1
	for leader < 0 {
		c.WaitHealthy(time.Minute)
		l, err := c.StreamLeader(ctx, stream, 30*time.Second)
		require.NoError(t, err)
		if l != own {
			leader = l
		} else {
			require.NoError(t, c.StepDown(ctx, stream))
		}
	}
	lagging := 3 - own - leader
	// The lagging member misses the event: stored by the leader and the
	// test's own node.
	require.NoError(t, c.Nodes[lagging].Proc.Signal(syscall.SIGSTOP))
	callID := "01J00000000000000000000002"
	_, err := c.Bus.JS.Publish(ctx, c.Bus.Subjects.Event("default", "faulttest", callID), []byte("STARTED"))
	require.NoError(t, err)
	// The leader goes silent; the lagging member comes back. A member
	// answers info without a leader only once JetStream has run 10 s.
	require.NoError(t, c.Nodes[leader].Proc.Signal(syscall.SIGSTOP))
	for time.Since(started) < 12*time.Second {
		time.Sleep(100 * time.Millisecond) // the server's start-up threshold passing, not a synchronisation
	}
	require.NoError(t, c.Nodes[lagging].Proc.Signal(syscall.SIGCONT))
	defer func() { _ = c.Nodes[leader].Proc.Signal(syscall.SIGCONT) }()
	nc, err := bus.Dial(bus.ConnConfig{URL: c.Nodes[lagging].URL, Name: "faulttest-lagging-reader"})
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var events jetstream.Stream
	require.Eventually(t, func() bool {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		events, err = js.Stream(sctx, stream)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	// Until the test's own node is elected (it alone holds the event and
	// a quorum with the lagging one), every read either waits or finds it.
	filter := c.Bus.Subjects.EventsAnyDispatcher("default", callID)
	at := time.Now()
	found := 0
	for found < 3 {
		require.Less(t, time.Since(at), time.Minute, "the event was never found")
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := bus.LastMsgFromLeader(rctx, js, events, filter)
		all, errAll := bus.AllMsgsFromLeader(rctx, js, events, filter)
		cancel()
		require.NotErrorIs(t, err, jetstream.ErrMsgNotFound, "a lagging member's answer was taken for the leader's")
		require.False(t, errAll == nil && len(all) == 0, "a lagging member's answer was taken for the leader's")
		if err == nil && errAll == nil {
			require.Equal(t, "STARTED", string(m.Data))
			require.Len(t, all, 1)
			found++
		}
	}
	figure(t, "found_after=%s (since the lagging member came back)", time.Since(at).Round(time.Millisecond))
}

// GetResult of a call the dispatcher has not seen (a restarted replica:
// it reads the stored call to learn whose it is) asked while the calls
// stream has no leader (its leader killed, no other elected yet) is
// answered within the caller's context, after the election: the read of
// the calls stream used to fail at once with "no responders" (the
// checker of TestClusterLeaderKills and TestClusterPartitions saw it
// after faults).
func TestClusterGetResultRidesOutAnElection(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c.StartWorker(faulttest.WorkerOptions{Name: "w"})
	c.WaitTool("ledger")
	id, err := c.Call(ctx, ledgerCall("ledger", 0, "stored"), 30*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, id, "the call was refused")
	// The call finished before the fault: a slow call on a loaded machine
	// is not a GetResult failure.
	_, err = c.Result(ctx, id, 30*time.Second)
	require.NoError(t, err)
	c.RestartDispatcher() // knows nothing of the call
	stream := c.Bus.Config.CallsStream()
	victim, err := c.StreamLeader(ctx, stream, 30*time.Second)
	require.NoError(t, err)
	retries := strings.Count(c.DispatcherLog.String(), scanRetry)
	at := time.Now()
	c.KillNode(victim)
	// A context far longer than an election.
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	r, err := c.Current().GetResult(rctx, identity.Default, id, 0)
	rcancel()
	answered := time.Since(at)
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, r.GetState())
	require.True(t, r.GetResponse().GetOk(), "%v", r.GetResponse().GetError())
	elected := c.Elections(ctx, []string{stream}, at)[stream]
	retries = strings.Count(c.DispatcherLog.String(), scanRetry) - retries
	figure(t, "elected_after=%s answered_after=%s scans_made_again=%d", elected.Round(time.Millisecond), answered.Round(time.Millisecond), retries)
}

// scanRetry is what the dispatcher logs (at debug) when it makes a scan
// of the calls stream again (dispatch: scanCalls).
const scanRetry = "the calls stream cannot be read now; reading again"
