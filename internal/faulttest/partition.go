package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/logtest"
)

// The ports every node of a cluster in namespaces listens on: each node
// has an address (and a namespace) of its own.
const (
	netnsClientPort = 4222
	netnsRoutePort  = 6222
	netnsHTTPPort   = 8222
)

// NewClusterNetns is NewCluster3 with every process in a network
// namespace of its own (NewNet): the three nats-server nodes ("n0", "n1",
// "n2" at netPrefix.10-12), the workers ("workers", .20; StartWorker runs
// them there) and the dispatcher ("dispatcher", .30): the dispatcher runs
// in the test process, but its NATS connection is made from its
// namespace (nats.SetCustomDialer), so cutting its namespace's link cuts
// it. The harness observes from the hub (the bridge, .1): its monitoring
// requests (WaitHealthy, MetaLeader, WatchLeader) are made from there,
// each on a connection of its own, so a node that went silent costs a
// request its timeout and nothing more. Where namespaces cannot be made,
// the test fails with CI=true and is skipped otherwise.
func NewClusterNetns(t testing.TB) *Cluster {
	t.Helper()
	nw := NewNet(t)
	nw.Add(10, "n0", "n1", "n2")
	nw.Add(20, "workers")
	nw.Add(30, "dispatcher")
	c := &Cluster{t: t, bin: Binaries(t), replicas: 3, DispatcherLog: &logtest.Buffer{}, Net: nw}
	c.Ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	httpc := &http.Client{Transport: &http.Transport{DialContext: nw.Hub.DialContext, DisableKeepAlives: true}}
	var routes []string
	for i := range 3 {
		ns := nw.Member(fmt.Sprintf("n%d", i))
		c.Nodes = append(c.Nodes, &Node{Name: ns.Role, host: ns.IP, port: netnsClientPort, http: netnsHTTPPort, ns: ns, httpc: httpc})
		routes = append(routes, c.Nodes[i].addr(netnsRoutePort))
	}
	c.startNodes(routes)
	c.dialer = nw.Member("dispatcher")
	log := slog.New(slog.NewTextHandler(c.DispatcherLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.startDispatcher(ClusterLayout(), log)
	return c
}

// NodeNS returns the namespace of node i (nil on loopback).
func (c *Cluster) NodeNS(i int) *Netns { return c.Nodes[i].ns }

// DispatcherNode returns the index of the node the dispatcher's
// connection is on now, or -1.
func (c *Cluster) DispatcherNode() int {
	return c.NodeNamed(c.Bus.NC.ConnectedServerName())
}

// PeersOf returns the namespaces of every node but i.
func (c *Cluster) PeersOf(i int) []*Netns {
	var out []*Netns
	for j, n := range c.Nodes {
		if j != i {
			out = append(out, n.ns)
		}
	}
	return out
}

// LeaderWatch follows, from the hub, which node leads a stream after a
// fault (Cluster.WatchLeader).
type LeaderWatch struct {
	stop chan struct{}
	done chan struct{}
	// elected is how long after the fault a node other than the old
	// leader reported leading the stream (by its leader_since); -1 while
	// none did. Read after done.
	elected time.Duration
	leader  string
}

// WatchLeader starts following which node leads stream after a fault at
// at that hit the stream's leader old (a node index; -1 when it is not
// known): every 100 ms it asks each other node's monitoring port which
// streams it leads, until one names the stream with a leader_since after
// at. It asks over the hub, not over a NATS connection that the fault may
// have frozen. Stop ends it and says when the new leader was elected.
func (c *Cluster) WatchLeader(stream string, old int, at time.Time) *LeaderWatch {
	w := &LeaderWatch{stop: make(chan struct{}), done: make(chan struct{}), elected: -1}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if d, name := c.newLeader(stream, old, at); d >= 0 {
				w.elected, w.leader = d, name
				return
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// newLeader asks every node but old, at once, whether it leads stream
// since after at: how long after at it was elected, and its name; -1 and
// "" when none does.
func (c *Cluster) newLeader(stream string, old int, at time.Time) (time.Duration, string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	best, name := time.Duration(-1), ""
	for i, n := range c.Nodes {
		if i == old {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			since, ok := n.leaderSince(ctx, stream)
			mu.Lock()
			defer mu.Unlock()
			if ok && since.After(at) && (best < 0 || since.Sub(at) < best) {
				best, name = since.Sub(at), n.Name
			}
		}()
	}
	wg.Wait()
	return best, name
}

// leaderSince asks the node's /jsz whether it leads stream, and since
// when.
func (n *Node) leaderSince(ctx context.Context, stream string) (time.Time, bool) {
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name    string `json:"name"`
				Cluster *struct {
					Leader      string     `json:"leader"`
					LeaderSince *time.Time `json:"leader_since"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := n.get(ctx, "/jsz?accounts=true&streams=true&stream-leader-only=true", &jsz); err != nil {
		return time.Time{}, false
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream && s.Cluster != nil && s.Cluster.Leader == n.Name && s.Cluster.LeaderSince != nil {
				return *s.Cluster.LeaderSince, true
			}
		}
	}
	return time.Time{}, false
}

// Stop ends the watch; it returns how long after the fault a new leader
// was elected and its name, or -1 and "" when none was seen.
func (w *LeaderWatch) Stop() (time.Duration, string) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.elected, w.leader
}

// ClientIPs returns, for each client connection of every node the hub
// reaches (its /connz), the connection's name and the address it comes
// from: the check that each process talks from its own namespace.
func (c *Cluster) ClientIPs(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	for _, n := range c.Nodes {
		var connz struct {
			Conns []struct {
				Name string `json:"name"`
				IP   string `json:"ip"`
			} `json:"connections"`
		}
		if err := n.get(ctx, "/connz?limit=1000", &connz); err != nil {
			continue
		}
		for _, cn := range connz.Conns {
			out[cn.Name] = append(out[cn.Name], cn.IP)
		}
	}
	return out
}
