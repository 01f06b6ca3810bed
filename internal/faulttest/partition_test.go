package faulttest_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/faulttest"
	"github.com/toolwire/toolwire/internal/testdeps"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The network faults of TestClusterPartitions (issue 26's harness): how
// long each lasts. The flapping is the 3 s down / 3 s up; a cut
// lasts long enough for the routes to close (4-6 s, ping_interval 2 s)
// and for a silent connection to be noticed (bus.Dial: 6-9 s).
const (
	flapDown, flapUp = 3 * time.Second, 3 * time.Second
	flapTimes        = 4
	oneWayCut        = 20 * time.Second
	ownNodeCut       = 20 * time.Second
	partitionCut     = 15 * time.Second
	// partitionAckWait is the workers' AckWait; their cut lasts longer.
	partitionAckWait = 5 * time.Second
	workerCut        = 12 * time.Second
	// partitionArrivals: a new caller every 20 ms (50 calls/s), whether
	// or not the earlier ones were answered.
	partitionArrivals = 20 * time.Millisecond
)

// netFault is one network fault of TestClusterPartitions and what
// followed it.
type netFault struct {
	name string
	// target chooses the node the fault hits (-1 for none), before the
	// fault; inject starts the fault and returns what heals it.
	target func(t *testing.T, c *faulttest.Cluster) int
	inject func(t *testing.T, c *faulttest.Cluster, victim int) func() error
	// hold is how long the fault lasts before it is healed (0: heal
	// waits for its end itself, as a flapping link's does).
	hold time.Duration
	// unreachable is how long at a time the fault leaves the calls
	// stream's leader unreachable from every other node without an
	// election (a link down for less than an election timeout): no
	// publish can be stored meanwhile, NATS's part as an election is.
	unreachable time.Duration

	// node is the name of the node hit ("" for none).
	node string
	// from: the calls made from here on (to the next fault's from) are
	// this fault's; at: the fault in place (its first link change or
	// route made); healed: the fault removed; healthy:
	// the cluster healthy and the load flowing again.
	from, at, healed, healthy time.Time
	// election: how long after at a new leader of the calls stream was
	// elected (-1: none before the heal).
	election time.Duration
	// healElection: how long after healed the calls stream had a new
	// leader (-1: none). A node cut from its peers comes back with the
	// higher terms of its lonely elections, and its peers step down for
	// it: NATS's second election of the fault.
	healElection time.Duration
	retries      int
	// leads: the groups the node hit led before the fault; elected: how
	// long after at each of them had a new leader (Cluster.Elections).
	leads   []string
	elected map[string]time.Duration
}

// On a three-node cluster in network namespaces (NewClusterNetns: every
// server, the workers and the dispatcher's connection each in a namespace
// of its own, joined by veth pairs to a bridge), under 50 calls/s of
// Call and Submit (an open load: callers arrive whether or not the
// earlier ones were answered), half of them of a tool that is not idempotent, one
// fault after another, each healed and the cluster healthy before the
// next: the calls stream leader's link flapping; a one-way cut of the
// dispatcher's node (it cannot send to its peers, its clients still
// reach it); the dispatcher's node cut (link down: silent, no RST; its
// connection kept writing meanwhile, so that its send buffer fills); a
// symmetric partition of the calls stream's leader from its peers (its
// clients still reach it); the workers cut for longer than AckWait. For
// the calls made during each fault, exactly: no accepted call lost, no
// call with two results, no caller told anything but the stored result,
// no call of the tool that is not idempotent run twice, no call answered
// refused that ran, every caller answered. FIGURE lines give per fault
// the admission stall, the first answer after it, the calls stream's
// election, and toolwire's share of the failover: the stall during the
// fault less the calls stream's election (or the time its leader was
// unreachable without one), and the stall after the heal less the
// election the heal caused (a node cut from its peers comes back with the
// higher terms of its lonely elections, and the leader steps down for
// it), whichever is longer.
func TestClusterPartitions(t *testing.T) {
	began := time.Now()
	c := faulttest.NewClusterNetns(t)
	ctx := t.Context()
	for _, name := range []string{"w0", "w1"} {
		c.StartWorker(faulttest.WorkerOptions{Name: name, Concurrency: 16, AckWait: partitionAckWait})
	}
	checkNamespaces(t, c)
	load := startOpenLoad(t, c, partitionArrivals)
	stopped := false
	defer func() {
		if !stopped {
			load.Stop()
		}
	}()
	calls := c.Bus.Config.CallsStream()
	faults := onlyFaults(t, partitionFaults(calls))
	for i, f := range faults {
		f.from = time.Now()
		if i == 0 {
			f.from = began
		}
		victim := f.target(t, c)
		if victim >= 0 {
			f.node, f.leads = c.Nodes[victim].Name, c.Leads(ctx, victim)
		}
		load.waitProgress(t, time.Now(), 50, 5, "before "+f.name)
		old, err := c.StreamLeader(ctx, calls, 30*time.Second)
		require.NoError(t, err)
		before := strings.Count(c.DispatcherLog.String(), "publishing again")
		heal := f.inject(t, c, victim)
		f.at = time.Now() // the fault in place
		watch := c.WatchLeader(calls, old, f.at)
		if f.hold > 0 {
			hold := time.NewTimer(f.hold) // the fault's duration
			<-hold.C
		}
		f.election, _ = watch.Stop()
		require.NoError(t, heal(), "heal %s", f.name)
		f.healed = time.Now()
		healWatch := c.WatchLeader(calls, -1, f.healed)
		t.Cleanup(func() { healWatch.Stop() }) // a test failing meanwhile
		if restarted := c.WaitHealthyOrRestart(45*time.Second, 2*time.Minute); len(restarted) > 0 {
			figure(t, "fault=%d %s: nats nodes stuck after the heal, restarted: %v", i+1, f.name, restarted)
		}
		load.waitProgress(t, f.at, 50, 5, "after "+f.name)
		f.healthy = time.Now()
		f.healElection, _ = healWatch.Stop()
		f.retries = strings.Count(c.DispatcherLog.String(), "publishing again") - before
		f.elected = c.Elections(ctx, f.leads, f.at)
	}
	load.Stop()
	stopped = true
	ops := load.snapshot()
	figure(t, "calls=%d in %s (%.0f/s) with %d faults", len(ops), time.Since(began).Round(time.Second),
		float64(len(ops))/time.Since(began).Seconds(), len(faults))
	reportPartitions(t, c, faults, ops)
}

// onlyFaults is faults, or those named in PARTITION_FAULTS (names
// separated by commas) when it is set: one fault run alone, to reproduce
// what a whole run found in it, takes a minute or two instead of seven.
func onlyFaults(t *testing.T, faults []*netFault) []*netFault {
	names := os.Getenv("PARTITION_FAULTS")
	if names == "" {
		return faults
	}
	keep := strings.Split(names, ",")
	for _, name := range keep {
		require.True(t, slices.ContainsFunc(faults, func(f *netFault) bool { return f.name == name }),
			"PARTITION_FAULTS=%s: no fault of the test is named %q", names, name)
	}
	return slices.DeleteFunc(faults, func(f *netFault) bool { return !slices.Contains(keep, f.name) })
}

// startOpenLoad is clusterLoad with callers that arrive every period
// whether or not the earlier ones were answered (an open system, as
// callers in production: a stall piles callers up, it does not slow their
// arrival), alternately of Call and Submit, each of a tool chosen at
// random between `ledger` (not idempotent) and `ledger_idem`.
func startOpenLoad(t *testing.T, c *faulttest.Cluster, every time.Duration) *clusterLoad {
	l := &clusterLoad{c: c, stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		rng := rand.New(rand.NewPCG(26, 7))
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			tool := "ledger"
			if rng.IntN(2) == 0 {
				tool = "ledger_idem"
			}
			req := ledgerCall(tool, 10+rng.IntN(90), fmt.Sprintf("open-%d", i))
			l.wg.Add(1) // while this goroutine holds one: never from zero
			go func() {
				defer l.wg.Done()
				l.do(t, i%2 == 1, req)
			}()
		}
	}()
	return l
}

// partitionFaults are the faults of TestClusterPartitions, in order.
func partitionFaults(calls string) []*netFault {
	// notOwn is the calls stream's leader, moved off the dispatcher's
	// node first: a fault of the dispatcher's node is a fault of its own.
	notOwn := func(t *testing.T, c *faulttest.Cluster) int {
		return faultTarget(t, c, &fault{how: "freeze", target: calls})
	}
	own := func(t *testing.T, c *faulttest.Cluster) int {
		t.Helper()
		v := c.DispatcherNode()
		require.GreaterOrEqual(t, v, 0, "the dispatcher is connected to %q", c.Bus.NC.ConnectedServerName())
		return v
	}
	none := func(*testing.T, *faulttest.Cluster) int { return -1 }
	return []*netFault{
		{name: "calls-leader-link-flapping", unreachable: flapDown, target: notOwn, inject: func(t *testing.T, c *faulttest.Cluster, v int) func() error {
			fl, err := c.Net.Flap(c.NodeNS(v), flapDown, flapUp, flapTimes)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fl.Stop() }) // a test failing meanwhile
			return fl.Wait
		}},
		{name: "dispatcher-node-one-way-cut", hold: oneWayCut, target: own, inject: func(t *testing.T, c *faulttest.Cluster, v int) func() error {
			require.NoError(t, c.Net.Blackhole(c.NodeNS(v), c.PeersOf(v)...))
			return func() error { return c.Net.Unblackhole(c.NodeNS(v), c.PeersOf(v)...) }
		}},
		{name: "dispatcher-node-cut", hold: ownNodeCut, target: own, inject: func(t *testing.T, c *faulttest.Cluster, v int) func() error {
			require.NoError(t, c.Net.LinkDown(c.NodeNS(v)))
			stop := keepWriting(c.Bus.NC)
			t.Cleanup(stop) // a test failing meanwhile
			return func() error {
				err := c.Net.LinkUp(c.NodeNS(v))
				stop() // after the heal: a write blocked on the dead link returns with it
				return err
			}
		}},
		{name: "calls-leader-symmetric-partition", hold: partitionCut, target: notOwn, inject: func(t *testing.T, c *faulttest.Cluster, v int) func() error {
			require.NoError(t, c.Net.Blackhole(c.NodeNS(v), c.PeersOf(v)...))
			for _, p := range c.PeersOf(v) {
				require.NoError(t, c.Net.Blackhole(p, c.NodeNS(v)))
			}
			return func() error {
				err := c.Net.Unblackhole(c.NodeNS(v), c.PeersOf(v)...)
				for _, p := range c.PeersOf(v) {
					err = errors.Join(err, c.Net.Unblackhole(p, c.NodeNS(v)))
				}
				return err
			}
		}},
		{name: "workers-cut-past-ackwait", hold: workerCut, target: none, inject: func(t *testing.T, c *faulttest.Cluster, _ int) func() error {
			w := c.Net.Member("workers")
			require.NoError(t, c.Net.LinkDown(w))
			return func() error { return c.Net.LinkUp(w) }
		}},
	}
}

// keepWriting keeps nc writing until stop: 64 KiB core messages every
// 20 ms on a subject nobody reads. With nc's server silent, the socket's
// send buffer (at most 4 MiB: tcp_wmem) fills within seconds, as it does
// on a dispatcher busier than this test's (issue 26: 1.16 MB queued in
// 8 s), and a write that finds it full blocks. The load alone does not
// fill it before the connection's PINGs notice the silence.
func keepWriting(nc *nats.Conn) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		data := make([]byte, 64<<10)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			_ = nc.Publish("faulttest.filler", data) // nobody reads it; errors while reconnecting are expected
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}

// checkNamespaces: the harness does what it says. The dispatcher's and
// the workers' connections come from their namespaces' addresses.
func checkNamespaces(t *testing.T, c *faulttest.Cluster) {
	t.Helper()
	clients := c.ClientIPs(t.Context())
	dispatcher, workers := c.Net.Member("dispatcher").IP, c.Net.Member("workers").IP
	require.Equal(t, []string{dispatcher}, clients["faulttest-dispatcher"], "clients: %v", clients)
	for name, ips := range clients {
		for _, ip := range ips {
			require.Contains(t, []string{dispatcher, workers}, ip, "connection %q comes from %s", name, ip)
		}
	}
}

// reportPartitions checks the ledger of the calls made during each fault
// and logs each fault's figures.
func reportPartitions(t *testing.T, c *faulttest.Cluster, faults []*netFault, ops []*op) {
	t.Helper()
	var accepts []time.Time
	for _, o := range ops {
		if !o.call && o.accepted {
			accepts = append(accepts, o.end)
		}
	}
	slices.SortFunc(accepts, func(a, b time.Time) int { return a.Compare(b) })
	for i, f := range faults {
		var mine []*op
		for _, o := range ops {
			if !o.start.Before(f.from) && (i == len(faults)-1 || o.start.Before(faults[i+1].from)) {
				mine = append(mine, o)
			}
		}
		rep := checkLedger(t, c, mine)
		unanswered, late := 0, 0
		for _, o := range mine {
			bound := clusterAnswerBound
			if o.call {
				bound += clusterCallWait
			}
			switch {
			case o.err != nil:
				unanswered++
			case o.end.Sub(o.start) > bound:
				late++
			}
		}
		entries := faulttest.ReadLedger(t, c.Ledger) // after the results were awaited
		admission := stall(accepts, f.at, f.healthy)
		first := time.Duration(-1)
		for _, o := range mine {
			if o.call && o.done != nil && o.start.After(f.at) && (first < 0 || o.end.Sub(f.at) < first) {
				first = o.end.Sub(f.at)
			}
		}
		// The fault and its heal each stall admission, and each may have
		// cost the calls stream an election (or, during the fault, left
		// its leader unreachable): toolwire's share is the longer of the
		// two stalls less NATS's part of it.
		during, after := stallWithin(accepts, f.at, f.healed), stallWithin(accepts, f.healed, f.healthy)
		share := max(during-max(0, f.election, f.unreachable), after-max(0, f.healElection))
		figure(t, "fault=%d %s node=%s admission_stall=%s first_answer=%s calls_election=%s toolwire_share=%s publish_retries=%d heal=%s healthy_after=%s",
			i+1, f.name, cmp.Or(f.node, "-"), admission.Round(time.Millisecond), first.Round(time.Millisecond), electionFigure(f.election),
			share.Round(time.Millisecond), f.retries, f.healed.Sub(f.at).Round(time.Millisecond), f.healthy.Sub(f.at).Round(time.Millisecond))
		figure(t, "fault=%d %s stall_during=%s calls_election=%s calls_leader_unreachable=%s stall_after_heal=%s calls_election_after_heal=%s", i+1, f.name,
			during.Round(time.Millisecond), electionFigure(f.election), f.unreachable, after.Round(time.Millisecond), electionFigure(f.healElection))
		figure(t, "fault=%d %s ledger: %s unanswered=%d answered_late=%d unknown_outcome=[%s]", i+1, f.name, rep, unanswered, late, unknownOutcomes(mine, entries))
		// Every group the node led needed an election too: admission also
		// writes some of them (the idempotency bucket, the meta group).
		longest := time.Duration(0)
		for _, d := range f.elected {
			longest = max(longest, d)
		}
		figure(t, "fault=%d %s elected=%s longest_election=%s stall_minus_longest=%s", i+1, f.name, elections(f.elected),
			longest.Round(time.Millisecond), (admission - longest).Round(time.Millisecond))
		for _, p := range rep.problems {
			t.Errorf("%s: %s", f.name, p)
		}
	}
	// A caller given an error has no call id to ask about: its call must
	// not run either.
	entries := faulttest.ReadLedger(t, c.Ledger)
	known := map[string]bool{}
	for _, o := range ops {
		known[o.id] = true
	}
	var unknown []string
	for id := range faulttest.Executions(entries) {
		if !known[id] {
			unknown = append(unknown, id)
		}
	}
	figure(t, "executions of calls whose caller got no call id: %d", len(unknown))
	if len(unknown) > 0 {
		t.Errorf("%d calls ran although their callers were answered with an error and no call id: %v", len(unknown), unknown[:min(len(unknown), 10)])
	}
}

// stallWithin is the longest time within [from, to] without a time of ts
// (sorted): unlike stall, a gap that began before from counts from from.
func stallWithin(ts []time.Time, from, to time.Time) time.Duration {
	i, _ := slices.BinarySearchFunc(ts, from, func(x, t time.Time) int { return x.Compare(t) })
	return stall(ts[i:], from, to)
}

// electionFigure is an election's time for a FIGURE line, "none" for -1.
func electionFigure(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

// unknownOutcomes sorts the calls of ops answered UNKNOWN_OUTCOME by what
// the ledger knows of them: completed (an execution ended), never ran (no
// execution), or started without an end.
func unknownOutcomes(ops []*op, entries []faulttest.Entry) string {
	phases := map[string]map[string]int{}
	for _, e := range entries {
		if phases[e.CallID] == nil {
			phases[e.CallID] = map[string]int{}
		}
		phases[e.CallID][e.Phase]++
	}
	completed, never, started := 0, 0, 0
	for _, o := range ops {
		if o.stored.GetError().GetType() != toolwirev1.ErrorType_ERROR_TYPE_UNKNOWN_OUTCOME {
			continue
		}
		switch p := phases[o.id]; {
		case p["done"] > 0:
			completed++
		case p["start"] == 0:
			never++
		default:
			started++
		}
	}
	return fmt.Sprintf("completed:%d never_ran:%d started_not_ended:%d", completed, never, started)
}

// TestNetStaleNamespacesSwept: namespaces a killed run left behind (named
// with the pid of a process that is gone) do not stop a new run: NewNet
// removes them, and leaves alone those of a run still going.
func TestNetStaleNamespacesSwept(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		testdeps.Missing(t, "run as root with iproute2", "faulttest: network namespaces need root and ip")
	}
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	stale := fmt.Sprintf("twft-%d-beef-hub", gone.Process.Pid)
	live := fmt.Sprintf("twft-%d-beef-hub", os.Getpid())
	for _, name := range []string{stale, live} {
		require.NoError(t, exec.Command("ip", "netns", "add", name).Run())
	}
	t.Cleanup(func() {
		for _, name := range []string{stale, live} {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	})
	n := faulttest.NewNet(t)
	n.Add(10, "a")
	require.NoFileExists(t, filepath.Join("/run/netns", stale))
	require.FileExists(t, filepath.Join("/run/netns", live))
	require.FileExists(t, filepath.Join("/run/netns", n.Member("a").Name))
	require.Equal(t, "10.213.7.10", n.Member("a").IP)
}

// TestNetFaults: the harness's faults do what doc.go says, on two
// namespaces and a TCP listener in each. A link down is silent (a dial
// times out: no RST, no ICMP); a one-way blackhole stops what its
// namespace sends to the other (so a TCP handshake fails both ways, the
// other side's SYN-ACK or its own SYN dropped) and nothing else; healing
// restores both; a flapping link ends up.
func TestNetFaults(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		testdeps.Missing(t, "run as root with iproute2", "faulttest: network namespaces need root and ip")
	}
	n := faulttest.NewNet(t)
	n.Add(10, "a", "b")
	a, b := n.Member("a"), n.Member("b")
	for _, m := range []*faulttest.Netns{a, b, n.Hub} {
		l, err := m.Listen("tcp", m.IP+":7000")
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
	}
	reach := func(from, to *faulttest.Netns) error {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		conn, err := from.DialContext(ctx, "tcp", to.IP+":7000")
		if err == nil {
			conn.Close()
		}
		return err
	}
	// reaches waits for from to reach to (again): healing is not instant
	// (the link's carrier and its bridge port come back, and a SYN or ARP
	// request lost on the way is sent again after a second, past one
	// dial's 500ms), so one dial right after a heal failed on a loaded
	// machine (CI, 2026-11-29). It must reach within 15s.
	reaches := func(from, to *faulttest.Netns) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			if err = reach(from, to); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // poll interval: a refusal answers at once
		}
		require.NoError(t, err, "%s does not reach %s again", from.Name, to.Name)
	}
	reaches(a, b)
	reaches(b, a)

	require.NoError(t, n.LinkDown(b))
	err := reach(a, b)
	require.True(t, timedOut(err), "a link down is silent: %v", err)
	require.NoError(t, n.LinkUp(b))
	reaches(a, b)

	require.NoError(t, n.Blackhole(a, b))
	require.Error(t, reach(a, b))
	err = reach(b, a)
	require.True(t, timedOut(err), "b's SYN arrives, a's answer is dropped: %v", err)
	reaches(a, n.Hub) // a still reaches everyone else
	reaches(n.Hub, a) // and everyone else reaches a
	require.NoError(t, n.Unblackhole(a, b))
	reaches(a, b)

	fl, err := n.Flap(b, 100*time.Millisecond, 100*time.Millisecond, 3)
	require.NoError(t, err)
	require.Error(t, reach(a, b), "down at once")
	require.NoError(t, fl.Wait())
	require.Len(t, fl.Downs, 3)
	reaches(a, b) // a flapping link ends up
}

// timedOut reports whether a dial ended by its deadline, not by an
// answer such as a refusal: the dialer reports it as the context's
// deadline or as a network timeout ("i/o timeout"), depending on where in
// the dial the deadline struck.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
