package faulttest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/logtest"
	"github.com/toolwire/toolwire/internal/policystore"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/testport"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Cluster is a nats-server process, a dispatcher in the test process
// connected to it over loopback TCP, and worker processes started on
// demand. Every process is killed when the test ends.
type Cluster struct {
	t          testing.TB
	bin        string
	storeDir   string
	port       int
	NATS       *Proc
	URL        string
	Bus        *bus.Bus
	Registry   *registry.Store
	Dispatcher *dispatch.Dispatcher
	// Policies is the dispatcher's policy holder (no policy in force
	// until a test applies one).
	Policies *policystore.Holder
	// Ledger is the file every ledgerworker of the cluster appends to.
	Ledger string
	// Nodes are the nats-server processes of a cluster made by
	// NewCluster3 (NATS is nil then); nil for NewCluster.
	Nodes []*Node
	// NATSMonitor logs and counts the dispatcher's connection's
	// disconnects, reconnects and moves; Watchdog moves it off a silent
	// or JetStream-less server (bus.Watchdog; idle on NewCluster's single
	// server).
	NATSMonitor *bus.ConnMonitor
	Watchdog    *bus.Watchdog
	// DispatcherLog holds what the dispatcher logged (info and above) on
	// a cluster made by NewCluster3; nil for NewCluster, whose dispatcher
	// logs nothing.
	DispatcherLog *logtest.Buffer
	// replicas of every stream and bucket: 1, or 3 on a cluster.
	replicas int
	// Net holds the network namespaces of a cluster made by
	// NewClusterNetns; nil otherwise (everything on loopback).
	Net *Net
	// dialer opens the dispatcher's connections (from its namespace on a
	// cluster in namespaces); nil = nats.go's own.
	dialer nats.CustomDialer
	// WorkerKeyFile is the signing key the cluster's ledgerworkers sign
	// with (--signing-key); the dispatcher trusts it for every pool.
	WorkerKeyFile string

	// What a dispatcher restart (RestartDispatcher) starts again with:
	// the layout, the dispatcher's configuration, its logger, its
	// signing key (kept across restarts, as a replica keeps its key
	// file) and the workers' keys it trusts.
	busCfg  bus.Config
	dispCfg dispatch.Config
	log     *slog.Logger
	signer  *signing.Key
	trust   *signing.Trust
	dispMu  sync.RWMutex // guards Dispatcher, Bus, Registry, Policies, Watchdog, NATSMonitor and nc while a restart swaps them
	nc      *nats.Conn   // the dispatcher's connection
}

// ClusterOptions shape NewClusterWith's dispatcher.
type ClusterOptions struct {
	// Bus is the layout the dispatcher opens (zero: the defaults).
	Bus bus.Config
	// Dispatcher is the dispatcher's configuration; the harness sets
	// Name ("faulttest" unless given), Logger, Policies, ConnHealth and
	// WorkerKeys.
	Dispatcher dispatch.Config
	// Logger is the dispatcher's (nil: it logs nothing).
	Logger *slog.Logger
}

// NewCluster starts a nats-server process and a dispatcher.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return NewClusterWith(t, ClusterOptions{})
}

// NewClusterWith is NewCluster with the layout and dispatcher
// configuration of o.
func NewClusterWith(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binaries(t), storeDir: t.TempDir(), port: freePort(t), replicas: 1, dispCfg: o.Dispatcher}
	c.Ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	c.URL = fmt.Sprintf("nats://127.0.0.1:%d", c.port)
	c.startNATS()
	c.startDispatcher(o.Bus, cmp.Or(o.Logger, quietLogger()))
	return c
}

// startDispatcher opens the layout cfg describes on c.URL and starts the
// registry and a dispatcher in the test process.
func (c *Cluster) startDispatcher(cfg bus.Config, log *slog.Logger) {
	t := c.t
	t.Helper()
	c.busCfg, c.log = cfg, log
	c.dispatcherKeys()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	monitor := bus.NewConnMonitor(log)
	conn := bus.ConnConfig{URL: c.URL, Name: "faulttest-dispatcher", Monitor: monitor, Dialer: c.dialer}
	nc, err := bus.Dial(conn)
	if err != nil {
		t.Fatalf("faulttest: dial: %v", err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.Open(ctx, nc, cfg, bus.Options{Signer: c.signer})
	if err != nil {
		t.Fatalf("faulttest: open bus: %v", err)
	}
	watchdog, err := bus.NewWatchdog(nc, conn, bus.AdmissionWatchdog(b.Config.CallsStream()))
	if err != nil {
		t.Fatalf("faulttest: watchdog: %v", err)
	}
	if err := watchdog.Start(ctx); err != nil {
		t.Fatalf("faulttest: watchdog: %v", err)
	}
	t.Cleanup(func() { _ = watchdog.Stop(context.Background()) })
	reg := registry.NewStore(b.Registry, quietLogger())
	if err := reg.Start(ctx); err != nil {
		t.Fatalf("faulttest: registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Stop(context.Background()) })
	policies := policystore.NewHolder(b, quietLogger())
	if err := policies.Start(ctx); err != nil {
		t.Fatalf("faulttest: policies: %v", err)
	}
	t.Cleanup(func() { _ = policies.Stop(context.Background()) })
	// MaxQueueWait (unless the options set it): a leader's loss stalls
	// the pool for seconds, and the default 2s bound on queue wait would
	// refuse most calls made during a fault OVERLOADED, so that few would
	// go through the failover these scenarios test. A stalled pool is
	// still refused under a minute's bound when it drains slowly after
	// the fault (judgeRefusals, cluster3_test.go, tells those refusals
	// apart); overload admission has its own tests (internal/dispatch,
	// overload_test.go).
	dc := c.dispCfg
	dc.MaxQueueWait = cmp.Or(dc.MaxQueueWait, time.Minute)
	dc.Name, dc.Logger, dc.Policies, dc.ConnHealth, dc.WorkerKeys = cmp.Or(dc.Name, "faulttest"), log, policies, watchdog, c.trust
	d, err := dispatch.New(b, reg, dc)
	if err != nil {
		t.Fatalf("faulttest: dispatcher: %v", err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatalf("faulttest: start dispatcher: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Stop(sctx)
	})
	c.dispMu.Lock()
	defer c.dispMu.Unlock()
	c.nc, c.NATSMonitor, c.Bus, c.Watchdog, c.Registry, c.Policies, c.Dispatcher = nc, monitor, b, watchdog, reg, policies, d
}

// dispatcherKeys makes, once, the dispatcher's signing key and the
// workers' key (WorkerKeyFile) that it trusts.
func (c *Cluster) dispatcherKeys() {
	t := c.t
	if c.trust != nil {
		return
	}
	var err error
	if c.signer, err = signing.NewKey(); err != nil {
		t.Fatalf("faulttest: dispatcher key: %v", err)
	}
	keys := t.TempDir()
	c.WorkerKeyFile = filepath.Join(keys, signing.LocalWorkerKey)
	if _, err := signing.KeyFile(c.WorkerKeyFile); err != nil {
		t.Fatalf("faulttest: worker key: %v", err)
	}
	if c.trust, err = signing.NewTrust(keys); err != nil {
		t.Fatalf("faulttest: worker keys: %v", err)
	}
}

// Current is the running dispatcher (RestartDispatcher replaces it; a
// load that runs across restarts calls through it).
func (c *Cluster) Current() *dispatch.Dispatcher {
	c.dispMu.RLock()
	defer c.dispMu.RUnlock()
	return c.Dispatcher
}

func (c *Cluster) startNATS() {
	c.NATS = Start(c.t, "nats-server", filepath.Join(c.bin, "nats-server"),
		"-js", "-sd", c.storeDir, "-a", "127.0.0.1", "-p", strconv.Itoa(c.port), "-n", "faulttest")
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.port), 100*time.Millisecond)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: nats-server not listening: %v\n%s", err, c.NATS.Output())
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// RestartNATS kills the nats-server process with SIGKILL and starts it
// again on the same port and store; it returns how long the port was down.
func (c *Cluster) RestartNATS() time.Duration {
	if c.NATS == nil {
		c.t.Fatalf("faulttest: RestartNATS on a cluster: use KillNode and RestartNode")
	}
	start := time.Now()
	c.NATS.Kill()
	c.startNATS()
	return time.Since(start)
}

// WorkerOptions shape a ledgerworker process.
type WorkerOptions struct {
	Name        string
	Concurrency int
	AckWait     time.Duration
	MaxDeliver  int
	Grace       time.Duration
	// Failpoints sets TOOLWIRE_FAILPOINTS, e.g. "after-fetch=exit-once".
	Failpoints string
}

// StartWorker starts a ledgerworker process serving the native pool.
func (c *Cluster) StartWorker(o WorkerOptions) *Proc {
	c.t.Helper()
	// --http "": several workers run on one host; no health/metrics port.
	args := []string{"--ledger", c.Ledger, "--nats-url", c.URL, "--signing-key", c.WorkerKeyFile, "--name", o.Name, "--log-level", "warn", "--http", ""}
	if o.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	}
	if o.AckWait > 0 {
		args = append(args, "--ack-wait", o.AckWait.String())
	}
	if o.MaxDeliver != 0 {
		args = append(args, "--max-deliver", strconv.Itoa(o.MaxDeliver))
	}
	if o.Grace > 0 {
		args = append(args, "--grace", o.Grace.String())
	}
	if c.replicas > 1 {
		args = append(args, "--stream-replicas", strconv.Itoa(c.replicas))
	}
	var env []string
	if o.Failpoints != "" {
		env = append(env, "TOOLWIRE_FAILPOINTS="+o.Failpoints)
	}
	bin := filepath.Join(c.bin, "ledgerworker")
	if c.Net != nil {
		bin, args = c.Net.Member("workers").Exec(bin, args...)
	}
	p := StartEnv(c.t, o.Name, env, bin, args...)
	for _, name := range []string{"ledger", "ledger_idem", "poison"} {
		c.WaitTool(name)
	}
	return p
}

// WaitTool polls until the registry lists name.
func (c *Cluster) WaitTool(name string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Registry.Get(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: tool %q never registered", name)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// Submit admits one call and returns its id, or "" when admission refused
// it (then it was never accepted).
func (c *Cluster) Submit(ctx context.Context, o *toolwirev1.CallRequest) (string, error) {
	s, err := c.Current().Submit(ctx, identity.Default, o)
	if err != nil {
		return "", err
	}
	if s.Rejected != nil {
		return "", nil
	}
	return s.CallID, nil
}

// Call admits one call and waits up to wait for it, as an agent does. It
// returns the call's id when the call was accepted (answered, or pending
// and stored), "" when it was refused (a refusal is an answer too: the
// caller knows the call will not run).
func (c *Cluster) Call(ctx context.Context, o *toolwirev1.CallRequest, wait time.Duration) (string, error) {
	r, err := c.Current().Call(ctx, identity.Default, o, wait)
	if err != nil {
		return "", err
	}
	if r.State == toolwirev1.CallState_CALL_STATE_DONE && r.Response.GetMeta().GetSource() == "dispatcher" {
		return "", nil // refused by admission
	}
	return r.CallId, nil
}

// Result waits up to wait for a call's terminal response.
func (c *Cluster) Result(ctx context.Context, callID string, wait time.Duration) (*toolwirev1.ToolResponse, error) {
	r, err := c.Current().GetResult(ctx, identity.Default, callID, wait)
	if err != nil {
		return nil, err
	}
	if r.State != toolwirev1.CallState_CALL_STATE_DONE {
		return nil, fmt.Errorf("call %s: %s", callID, r.State)
	}
	return r.Response, nil
}

// Report is the queue checker's verdict over a set of calls.
type Report struct {
	Submitted, Accepted, Terminal, Lost, Duplicates int
	// Outcomes counts terminal responses by error type ("OK" for success).
	Outcomes map[string]int
	// Executions counts ledger "start" entries per accepted call.
	Executions map[string]int
	// LostIDs are the accepted calls without a terminal result.
	LostIDs []string
}

func (r Report) String() string {
	return fmt.Sprintf("submitted=%d accepted=%d terminal=%d lost=%d duplicates=%d outcomes=%v",
		r.Submitted, r.Accepted, r.Terminal, r.Lost, r.Duplicates, r.Outcomes)
}

// Check waits up to wait for every accepted call's result and counts, in
// the manner of Jepsen's queue checker: lost = accepted − terminal, and
// duplicates = calls with more than one result message.
func (c *Cluster) Check(ctx context.Context, submitted int, accepted []string, wait time.Duration) Report {
	c.t.Helper()
	rep := Report{Submitted: submitted, Accepted: len(accepted), Outcomes: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, id := range accepted {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := c.Result(ctx, id, wait)
			n := c.resultCount(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if n > 1 {
				rep.Duplicates++
			}
			if err != nil {
				rep.Lost++
				rep.LostIDs = append(rep.LostIDs, id)
				return
			}
			rep.Terminal++
			if resp.Ok {
				rep.Outcomes["OK"]++
			} else {
				rep.Outcomes[resp.Error.Type.String()]++
			}
		}()
	}
	wg.Wait()
	execs := Executions(ReadLedger(c.t, c.Ledger))
	rep.Executions = map[string]int{}
	for _, id := range accepted {
		rep.Executions[id] = execs[id]
	}
	return rep
}

func (c *Cluster) resultCount(ctx context.Context, callID string) uint64 {
	info, err := c.Bus.Results.Info(ctx, jetstream.WithSubjectFilter(c.Bus.Subjects.ResultAnyDispatcher("default", callID)))
	if err != nil {
		return 0
	}
	var n uint64
	for _, k := range info.State.Subjects {
		n += k
	}
	return n
}

// freePort is a port that stays the node's across restarts (testport).
func freePort(t testing.TB) int { return testport.Free(t) }

// Diagnose describes what the streams know of a call, for failure output.
func (c *Cluster) Diagnose(ctx context.Context, callID string) string {
	var out string
	cons, err := c.Bus.Calls.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err == nil {
		found := false
		for {
			batch, err := cons.FetchNoWait(500)
			if err != nil {
				break
			}
			n := 0
			for m := range batch.Messages() {
				n++
				if md, _ := m.Metadata(); md != nil && !found {
					call := &toolwirev1.ToolCall{}
					if proto.Unmarshal(m.Data(), call) == nil && call.CallId == callID {
						found = true
						out += fmt.Sprintf("in CALLS at seq %d; ", md.Sequence.Stream)
					}
				}
			}
			if n == 0 {
				break
			}
		}
		if !found {
			out += "NOT in CALLS; "
		}
	}
	if ci, err := c.Bus.Calls.Consumer(ctx, c.Bus.Config.PoolConsumer("native")); err == nil {
		if info, err := ci.Info(ctx); err == nil {
			out += fmt.Sprintf("pool: pending=%d ack_pending=%d redelivered=%d ack_floor=%d delivered=%d; ",
				info.NumPending, info.NumAckPending, info.NumRedelivered, info.AckFloor.Stream, info.Delivered.Stream)
		}
	}
	out += fmt.Sprintf("executions=%d; results_by_info=%d; ", Executions(ReadLedger(c.t, c.Ledger))[callID], c.resultCount(ctx, callID))
	if _, err := c.Bus.Results.GetLastMsgForSubject(ctx, c.Bus.Subjects.Result("default", "faulttest", callID)); err != nil {
		out += "literal last-by-subject: " + err.Error() + "; "
	} else {
		out += "literal last-by-subject: found; "
	}
	if _, err := c.Bus.Results.GetLastMsgForSubject(ctx, c.Bus.Subjects.ResultAnyDispatcher("default", callID)); err != nil {
		out += "wildcard last-by-subject: " + err.Error()
	} else {
		out += "wildcard last-by-subject: found"
	}
	return out
}
