package faulttest_test

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/faulttest"
)

// leaveFrozenBound bounds the time from freezing the dispatcher's server
// to the first acknowledged publish on its connection after the fault
// (measured: 0.5 to 2.2 s, see the FIGURE lines); generous so that a loaded
// CI machine does not flake.
const leaveFrozenBound = 15 * time.Second

// publisher publishes to a stream of its own on the dispatcher's
// connection, one publish at a time, and records when each acknowledged
// publish was sent and acknowledged.
type publisher struct {
	mu    sync.Mutex
	acked [][2]time.Time // sent, acknowledged
	stop  chan struct{}
	done  chan struct{}
}

func startPublisher(c *faulttest.Cluster, subject string) *publisher {
	p := &publisher{stop: make(chan struct{}), done: make(chan struct{})}
	payload := []byte(strings.Repeat("x", 4096)) // fills a silent server's socket buffer as real load would
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			sent := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := c.Bus.JS.Publish(ctx, subject, payload)
			cancel()
			if err == nil {
				p.mu.Lock()
				p.acked = append(p.acked, [2]time.Time{sent, time.Now()})
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// firstAfter returns the first acknowledgement after at of a publish
// sent after sent, if any.
func (p *publisher) firstAfter(sent, at time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acked {
		if a[0].After(sent) && a[1].After(at) {
			return a[1], true
		}
	}
	return time.Time{}, false
}

func (p *publisher) Stop() {
	close(p.stop)
	<-p.done
}

// waitFor polls cond every 10 ms until it holds or wait has passed.
func waitFor(wait time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	return true
}

// On a three-node cluster, the dispatcher's connection publishing steadily
// (JetStream publishes to an R3 stream led by another node) leaves the
// node it is connected to when that node freezes (SIGSTOP: its sockets
// stay open, so only unanswered PINGs and probes tell), three times: the
// watchdog moves it to another node and publishes are acknowledged again
// within leaveFrozenBound; the disconnect, the reconnect and the change of
// server are counted and logged.
func TestClusterConnectionLeavesFrozenServer(t *testing.T) {
	c := faulttest.NewCluster3(t)
	ctx := t.Context()
	const stream = "CONNTEST"
	_, err := c.Bus.JS.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"conntest.>"},
		Replicas: 3, MaxBytes: 4 << 20, Discard: jetstream.DiscardOld})
	require.NoError(t, err)
	pub := startPublisher(c, "conntest.load")
	defer pub.Stop()
	mon := c.NATSMonitor
	for round := range 3 {
		victim := c.NodeNamed(c.Bus.NC.ConnectedServerName())
		require.GreaterOrEqual(t, victim, 0, "connected to a node of the cluster")
		// The stream's leader elsewhere: what is measured is the client
		// leaving its server, not an election.
		for i := 0; ; i++ {
			l, err := c.StreamLeader(ctx, stream, 30*time.Second)
			require.NoError(t, err)
			if l != victim {
				break
			}
			require.Less(t, i, 10, "the stream's leader stays on the dispatcher's node")
			require.NoError(t, c.StepDown(ctx, stream))
		}
		before := time.Now()
		require.True(t, waitFor(10*time.Second, func() bool { _, ok := pub.firstAfter(before, before); return ok }),
			"publishing before the fault")
		moves, changes, disconnects := mon.Moves(), mon.ServerChanges(), mon.Disconnects()

		logFrom := len(c.DispatcherLog.String())
		at := time.Now()
		require.NoError(t, c.Nodes[victim].Proc.Signal(syscall.SIGSTOP))
		// moved: when the connection was seen on another node (polled
		// every 10 ms); resumed: the first publish acknowledged there (a
		// publish sent just after SIGSTOP may be acknowledged by the
		// server before it stops).
		var moved time.Duration
		ok := waitFor(leaveFrozenBound, func() bool {
			if moved == 0 && mon.ServerChanges() > changes {
				moved = time.Since(at)
			}
			_, ok := pub.firstAfter(at, at.Add(moved-10*time.Millisecond))
			return ok && moved > 0
		})
		resumed, _ := pub.firstAfter(at, at.Add(moved-10*time.Millisecond))
		require.NoError(t, c.Nodes[victim].Proc.Signal(syscall.SIGCONT))
		require.True(t, ok, "round %d: publishes not acknowledged again within %s of freezing %s (moved after %s)",
			round, leaveFrozenBound, c.Nodes[victim].Name, moved)
		require.NotEqual(t, c.Nodes[victim].Name, c.Bus.NC.ConnectedServerName(), "on another node")
		require.Greater(t, mon.Disconnects(), disconnects, "the disconnect is counted")
		figure(t, "round %d: froze %s; connection on another node after %s (watchdog moves %d); first publish acknowledged after %s",
			round, c.Nodes[victim].Name, moved.Round(10*time.Millisecond), mon.Moves()-moves, resumed.Sub(at).Round(10*time.Millisecond))
		for _, line := range strings.Split(c.DispatcherLog.String()[logFrom:], "\n") {
			if !strings.Contains(line, "level=DEBUG") && (strings.Contains(line, "NATS") || strings.Contains(line, "moving")) {
				t.Log(line)
			}
		}
		c.WaitHealthy(2 * time.Minute)
	}
	log := c.DispatcherLog.String()
	require.Contains(t, log, "NATS connection lost; reconnecting")
	require.Contains(t, log, "NATS connection moved to another server")
	require.Positive(t, mon.Moves(), "the watchdog, not the PINGs, moved the connection")
}

// A node whose two peers are dead fails every JetStream request (no
// quorum), but no other server is reachable: the watchdog stays on it
// (moving would only leave the connection without a server), says so,
// and counts no move.
func TestClusterWatchdogStaysWithoutQuorum(t *testing.T) {
	c := faulttest.NewCluster3(t)
	own := c.NodeNamed(c.Bus.NC.ConnectedServerName())
	require.GreaterOrEqual(t, own, 0)
	for i := range c.Nodes {
		if i != own {
			c.KillNode(i)
		}
	}
	require.True(t, waitFor(2*time.Minute, func() bool {
		return strings.Contains(c.DispatcherLog.String(), "no other server of the cluster is healthier; staying")
	}), "the watchdog judged the server unhealthy and stayed")
	require.Zero(t, c.NATSMonitor.Moves())
	require.Zero(t, c.NATSMonitor.Disconnects())
	require.Equal(t, c.Nodes[own].Name, c.Bus.NC.ConnectedServerName())
	for i := range c.Nodes {
		if i != own {
			c.RestartNode(i)
		}
	}
	c.WaitHealthy(2 * time.Minute)
}
