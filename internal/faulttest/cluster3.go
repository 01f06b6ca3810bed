package faulttest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Node is one nats-server process of a cluster made by NewCluster3.
type Node struct {
	// Name is the node's server_name: what StreamInfo.Cluster.Leader says.
	Name string
	// URL is the node's client URL.
	URL  string
	Proc *Proc
	// conf is the node's configuration file; port, the client port.
	conf string
	port int
	http int
	// host is the address the node listens on ("" = 127.0.0.1); ns, the
	// namespace it runs in on a cluster made by NewClusterNetns, and
	// httpc the client that reaches its monitoring port from there.
	host  string
	ns    *Netns
	httpc *http.Client
}

// addr is the node's host and port.
func (n *Node) addr(port int) string {
	return net.JoinHostPort(cmp.Or(n.host, "127.0.0.1"), strconv.Itoa(port))
}

// ClusterLayout is the layout of the streams on a cluster made by
// NewCluster3: three replicas, and byte limits small enough that each
// node's reservation (bus.Config.ReservedBytes, about 170 MiB) fits the
// nodes' max_file_store (ClusterMaxFileStore) on a CI machine's disk. The
// defaults reserve 8 GiB per node.
func ClusterLayout() bus.Config {
	return bus.Config{
		Replicas:            3,
		CallsMaxBytes:       64 << 20,
		ResultsMaxBytes:     32 << 20,
		EventsMaxBytes:      32 << 20,
		DLQMaxBytes:         4 << 20,
		RetriesMaxBytes:     4 << 20,
		AdvisoriesMaxBytes:  2 << 20,
		CancelsMaxBytes:     2 << 20,
		IdempotencyMaxBytes: 8 << 20,
		RegistryMaxBytes:    4 << 20,
		SessionsMaxBytes:    2 << 20,
		PoliciesMaxBytes:    2 << 20,
		ApprovalsMaxBytes:   4 << 20,
		LimitsMaxBytes:      4 << 20,
		TasksMaxBytes:       2 << 20,
		BlobsMaxBytes:       16 << 20,
		DelegationMaxBytes:  1 << 20,
	}
}

// ClusterMaxFileStore and ClusterMaxMemStore are each node's JetStream
// limits (bytes): limits on what the node accounts, not allocations.
const (
	ClusterMaxFileStore = 256 << 20
	ClusterMaxMemStore  = 64 << 20
)

// NewCluster3 starts a three-node JetStream cluster of nats-server
// processes on loopback (every port chosen at random; each node with a
// store directory and a configuration file of its own; routes PING every
// 2 s, 2 outstanding, as the Helm chart's bundled cluster), then the
// dispatcher in the test process with the layout of ClusterLayout, given
// every node's URL. Workers (StartWorker) are given every URL too, and
// --stream-replicas 3. The dispatcher logs at debug level into
// DispatcherLog.
func NewCluster3(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binaries(t), replicas: 3, DispatcherLog: &logtest.Buffer{}}
	c.Ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	const n = 3
	clusterPorts := make([]int, n)
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Name: fmt.Sprintf("n%d", i), port: freePort(t), http: freePort(t)})
		clusterPorts[i] = freePort(t)
	}
	routes := make([]string, n)
	for i, node := range c.Nodes {
		routes[i] = node.addr(clusterPorts[i])
	}
	c.startNodes(routes)
	log := slog.New(slog.NewTextHandler(c.DispatcherLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c.startDispatcher(ClusterLayout(), log)
	return c
}

// startNodes writes each node's configuration file (its route listener
// at routes[i], routes to the others) and starts the nodes, then waits
// until the cluster is healthy.
func (c *Cluster) startNodes(routes []string) {
	t := c.t
	t.Helper()
	var urls []string
	for i, node := range c.Nodes {
		node.URL = "nats://" + node.addr(node.port)
		urls = append(urls, node.URL)
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, "nats-route://"+r)
			}
		}
		dir := t.TempDir()
		node.conf = filepath.Join(dir, "nats.conf")
		conf := fmt.Sprintf(`server_name: %s
listen: %q
http: %q
jetstream {
  store_dir: %q
  max_file_store: %d
  max_memory_store: %d
}
cluster {
  name: faulttest
  listen: %q
  routes: [%s]
  # as the Helm chart's bundled cluster: a silent peer is dropped after
  # 4-6 s, not the routes' default 60-90 s
  ping_interval: "2s"
  ping_max: 2
}
`, node.Name, node.addr(node.port), node.addr(node.http), filepath.Join(dir, "store"), ClusterMaxFileStore, ClusterMaxMemStore,
			routes[i], strings.Join(peers, ", "))
		if err := os.WriteFile(node.conf, []byte(conf), 0o600); err != nil {
			t.Fatalf("faulttest: %v", err)
		}
	}
	c.URL = strings.Join(urls, ",")
	for i := range c.Nodes {
		c.startNode(i)
	}
	c.WaitHealthy(60 * time.Second)
}

func (c *Cluster) startNode(i int) {
	node := c.Nodes[i]
	bin, args := filepath.Join(c.bin, "nats-server"), []string{"-c", node.conf}
	dial := (&net.Dialer{}).DialContext
	if node.ns != nil {
		bin, args = node.ns.Exec(bin, args...)
		dial = c.Net.Hub.DialContext
	}
	node.Proc = Start(c.t, "nats-server "+node.Name, bin, args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		conn, err := dial(ctx, "tcp", node.addr(node.port))
		cancel()
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: %s not listening: %v\n%s", node.Name, err, node.Proc.Output())
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// KillNode kills node i's nats-server with SIGKILL: no lame-duck mode, no
// leader hand-over; the other nodes notice only by missed heartbeats.
func (c *Cluster) KillNode(i int) { c.Nodes[i].Proc.Kill() }

// RestartNode starts node i again, on the same ports and store, after
// KillNode.
func (c *Cluster) RestartNode(i int) {
	c.t.Helper()
	select {
	case <-c.Nodes[i].Proc.Exited():
	default:
		c.t.Fatalf("faulttest: RestartNode(%d): %s is running", i, c.Nodes[i].Name)
	}
	c.startNode(i)
}

// NodeNamed returns the index of the node with the server name, or -1.
func (c *Cluster) NodeNamed(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// StreamLeader returns the index of the node leading stream (a stream
// name: c.Bus.Config.CallsStream(), ...), waiting up to wait for the
// stream to have a leader.
func (c *Cluster) StreamLeader(ctx context.Context, stream string, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		i, err := c.streamLeader(ctx, stream)
		if err == nil || time.Now().After(deadline) {
			return i, err
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling with a deadline
		}
	}
}

func (c *Cluster) streamLeader(ctx context.Context, stream string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := c.Bus.JS.Stream(ctx, stream)
	if err != nil {
		return -1, fmt.Errorf("faulttest: stream %s: %w", stream, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || c.NodeNamed(info.Cluster.Leader) < 0 {
		return -1, fmt.Errorf("faulttest: stream %s has no leader", stream)
	}
	return c.NodeNamed(info.Cluster.Leader), nil
}

// Leads lists what node i leads now: the streams (and buckets' streams),
// the calls stream's durable consumers ("consumer NAME"), "meta" for the
// JetStream meta group, and "results consumer" when it hosts a consumer
// of the results stream (the dispatcher's, of one replica). What cannot
// be looked up is left out.
func (c *Cluster) Leads(ctx context.Context, i int) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []string
	if c.MetaLeader(ctx) == c.Nodes[i].Name {
		out = append(out, "meta")
	}
	names := c.Bus.JS.StreamNames(ctx)
	var streams []string
	for name := range names.Name() {
		streams = append(streams, name)
	}
	slices.Sort(streams)
	for _, name := range streams {
		if l, err := c.streamLeader(ctx, name); err == nil && l == i {
			out = append(out, name)
		}
	}
	cons := c.Bus.Calls.ListConsumers(ctx)
	for ci := range cons.Info() {
		if ci.Config.Durable != "" && ci.Cluster != nil && ci.Cluster.Leader == c.Nodes[i].Name {
			out = append(out, "consumer "+ci.Name)
		}
	}
	results := c.Bus.Results.ListConsumers(ctx)
	for ci := range results.Info() {
		if ci.Cluster != nil && ci.Cluster.Leader == c.Nodes[i].Name {
			out = append(out, "results consumer")
		}
	}
	return out
}

// ResultsConsumerSince returns how long after at the oldest consumer of
// the results stream created after at was created (the dispatcher's
// results consumer, made again after its node died), or -1.
func (c *Cluster) ResultsConsumerSince(ctx context.Context, at time.Time) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	first := time.Duration(-1)
	results := c.Bus.Results.ListConsumers(ctx)
	for ci := range results.Info() {
		if d := ci.Created.Sub(at); d > 0 && (first < 0 || d < first) {
			first = d
		}
	}
	return first
}

// MetaLeader asks the live nodes' monitoring endpoints for the name of
// the JetStream meta group's leader; "" when none knows one. A node that
// has not noticed yet that the leader died still names it.
func (c *Cluster) MetaLeader(ctx context.Context) string {
	for _, n := range c.Nodes {
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := n.get(ctx, "/jsz", &jsz); err == nil && jsz.Meta != nil && jsz.Meta.Leader != "" {
			return jsz.Meta.Leader
		}
	}
	return ""
}

// get reads a monitoring endpoint of the node into v (when not nil); it
// fails unless the endpoint answers 200.
func (n *Node) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr(n.http)+path, nil)
	if err != nil {
		return err
	}
	resp, err := cmp.Or(n.httpc, http.DefaultClient).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s %s", n.Name, path, resp.Status, bytes.TrimSpace(body))
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// WaitHealthy waits up to wait until every node is up and healthy
// (/healthz: JetStream current, every stream and consumer it holds
// current) and, once the dispatcher runs, every stream has a leader and
// two current replicas. It fails the test when the cluster does not heal.
func (c *Cluster) WaitHealthy(wait time.Duration) {
	c.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(wait)
	for {
		err := c.healthy(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: cluster not healthy after %s: %v", wait, err)
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

// WaitHealthyOrRestart is WaitHealthy for a cluster after a network
// fault: a node whose own /healthz still fails after stuck (one seen
// retrying a RAFT catch-up for minutes after a flapping link: "Expected
// first catchup entry to be a snapshot and peerstate, will retry") is
// restarted, as an operator would, and the cluster then has wait to be
// healthy. It returns the names of the nodes restarted.
//
// Nodes are restarted one at a time, each given wait/2 to catch up
// before the next is looked at: on a loaded machine all three were still
// catching up 30 s after a heal, and restarting the three together (a
// whole-cluster restart, every file store rebuilt) left the cluster
// unhealthy past the bound.
func (c *Cluster) WaitHealthyOrRestart(stuck, wait time.Duration) []string {
	c.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(stuck)
	for c.healthy(ctx) != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
	var restarted []string
	for i, n := range c.Nodes {
		if c.healthy(ctx) == nil {
			break
		}
		err := n.get(ctx, "/healthz", nil)
		if err == nil {
			continue
		}
		c.t.Logf("faulttest: %s still unhealthy %s after the heal (%v); restarting it", n.Name, stuck, err)
		c.KillNode(i)
		n.Proc.Wait(c.t, 30*time.Second)
		c.RestartNode(i)
		restarted = append(restarted, n.Name)
		c.nudgeStuckStreams(wait / 2)
	}
	c.WaitHealthy(wait / 2)
	return restarted
}

// stuckStream is the stream a node's /healthz names as not current (the
// body is JSON: its '>' comes escaped).
var stuckStream = regexp.MustCompile(`stream '\$G (?:>|\\u003e) ([A-Za-z0-9_-]+)' is not current`)

// nudgeStuckStreams waits up to wait for the cluster to be healthy;
// while it is not, every nudgeEvery, a node whose /healthz names a stream
// it cannot catch up (the restarted node asking its leader for a snapshot
// that never comes) has that stream's leader asked to step down, as an
// operator would: a new leader sends the follower its snapshot. Seen in
// a loaded run: one step down was not always enough, nor one look.
func (c *Cluster) nudgeStuckStreams(wait time.Duration) {
	c.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(wait)
	next := time.Now().Add(nudgeEvery)
	for c.healthy(ctx) != nil && time.Now().Before(deadline) {
		if c.Bus != nil && time.Now().After(next) {
			next = time.Now().Add(nudgeEvery)
			c.nudgeOnce(ctx)
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

// nudgeEvery is how often nudgeStuckStreams asks again.
const nudgeEvery = 20 * time.Second

// nudgeOnce asks the leader of each stream a node cannot catch up to step
// down, and logs why a node is unhealthy otherwise.
func (c *Cluster) nudgeOnce(ctx context.Context) {
	for _, n := range c.Nodes {
		err := n.get(ctx, "/healthz", nil)
		if err == nil {
			continue
		}
		m := stuckStream.FindStringSubmatch(err.Error())
		if m == nil {
			c.t.Logf("faulttest: %s still unhealthy (%v)", n.Name, err)
			continue
		}
		c.t.Logf("faulttest: %s still cannot catch up stream %s (%v); asking its leader to step down", n.Name, m[1], err)
		if err := c.StepDown(ctx, m[1]); err != nil {
			c.t.Logf("faulttest: step down of %s: %v", m[1], err)
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	for _, n := range c.Nodes {
		select {
		case <-n.Proc.Exited():
			return fmt.Errorf("%s is down", n.Name)
		default:
		}
		if err := n.get(ctx, "/healthz", nil); err != nil {
			return err
		}
	}
	if c.Bus == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	names := c.Bus.JS.StreamNames(ctx)
	var errs []error
	for name := range names.Name() {
		s, err := c.Bus.JS.Stream(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			errs = append(errs, fmt.Errorf("stream %s has no leader", name))
			continue
		}
		current := 0
		for _, r := range info.Cluster.Replicas {
			if r.Current && !r.Offline {
				current++
			}
		}
		if current != len(c.Nodes)-1 {
			errs = append(errs, fmt.Errorf("stream %s: %d of %d replicas current", name, current, len(c.Nodes)-1))
		}
	}
	if err := names.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ResultCounts scans the results stream once and returns how many results
// it stores for each call id: distinct stream sequences, so a message the
// scan's consumer hands over twice is not a second result. A scan that
// fails (a cluster just healed may answer a request with no responders)
// is made again, for up to a minute.
func (c *Cluster) ResultCounts(ctx context.Context) (map[string]int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.resultCounts(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return out, err
		}
		time.Sleep(500 * time.Millisecond) // polling with a deadline
	}
}

func (c *Cluster) resultCounts(ctx context.Context) (map[string]int, error) {
	cons, err := c.Bus.Results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("faulttest: results scan: %w", err)
	}
	info, err := c.Bus.Results.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("faulttest: results info: %w", err)
	}
	seqs := map[string]map[uint64]bool{}
	var seen uint64
	for seen < info.State.LastSeq {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("faulttest: results scan: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("faulttest: results scan: %w", err)
			}
			seen = md.Sequence.Stream
			s := m.Subject()
			id := s[strings.LastIndexByte(s, '.')+1:]
			if seqs[id] == nil {
				seqs[id] = map[uint64]bool{}
			}
			seqs[id][seen] = true
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("faulttest: results scan: %w", err)
		}
		if n == 0 {
			break
		}
	}
	out := make(map[string]int, len(seqs))
	for id, s := range seqs {
		out[id] = len(s)
	}
	return out, nil
}

// DescribeResults describes each result the results stream stores for
// call callID (of the default tenant), read from the stream's leader, for
// the output of a test that found more than one: its sequence, subject,
// time, the expected last subject sequence it was published with, its
// signer, and the worker and attempt it names.
func (c *Cluster) DescribeResults(ctx context.Context, callID string) string {
	msgs, err := bus.AllMsgsFromLeader(ctx, c.Bus.JS, c.Bus.Results, c.Bus.Subjects.ResultAnyDispatcher("default", callID))
	if err != nil {
		return fmt.Sprintf("results of %s not read: %v", callID, err)
	}
	var out []string
	for _, m := range msgs {
		var resp toolwirev1.ToolResponse
		perr := proto.Unmarshal(m.Data, &resp)
		out = append(out, fmt.Sprintf("seq=%d subject=%s at=%s expected_last_subject_seq=%q signer=%q worker=%q attempt=%d ok=%v decode_err=%v",
			m.Sequence, m.Subject, m.Time.UTC().Format(time.StampMilli), m.Header.Get(jetstream.ExpectedLastSubjSeqHeader),
			m.Header.Get(signing.HeaderSigner), resp.GetMeta().GetWorker(), resp.GetMeta().GetAttempt(), resp.GetOk(), perr))
	}
	return strings.Join(out, "; ")
}

// Elections returns, for each of leads (what Leads returned for a node:
// stream names and "consumer NAME" of the calls stream; "meta" and
// "results consumer" are left out), how long after at its current leader was elected; -1 for one
// that has no leader now or was elected before at.
func (c *Cluster) Elections(ctx context.Context, leads []string, at time.Time) map[string]time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := map[string]time.Duration{}
	for _, what := range leads {
		var ci *jetstream.ClusterInfo
		if name, ok := strings.CutPrefix(what, "consumer "); ok {
			if cons, err := c.Bus.Calls.Consumer(ctx, name); err == nil {
				ci = cons.CachedInfo().Cluster
			}
		} else if what != "meta" && what != "results consumer" {
			if s, err := c.Bus.JS.Stream(ctx, what); err == nil {
				ci = s.CachedInfo().Cluster
			}
		} else {
			continue
		}
		out[what] = -1
		if ci != nil && ci.LeaderSince != nil && ci.LeaderSince.After(at) {
			out[what] = ci.LeaderSince.Sub(at)
		}
	}
	return out
}

// StepDown asks the leader of stream to step down (another node is
// elected at once).
func (c *Cluster) StepDown(ctx context.Context, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Bus.NC.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
	return err
}
