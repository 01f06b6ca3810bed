// Package toolworker builds a worker process: the tools you pass, served
// on toolwire's JetStream fabric with its timeouts, heartbeats, result
// fencing and graceful shutdown. A custom worker binary is a main that
// defines its tools with package tool and calls Main:
//
//	func main() {
//		hello, err := tool.New("hello", func(ctx context.Context, in struct{ Name string `json:"name"` }) (string, error) {
//			return "hello " + in.Name, nil
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		toolworker.Main(hello)
//	}
//
// Main reads flags and TOOLWIRE_* environment variables (--nats-url,
// --nats-creds, --pools, --concurrency, --grace, ...), stops on SIGTERM or
// SIGINT (finishing in-flight calls within --grace, handing the rest back),
// and exits 0 after a clean stop, 1 on a runtime error and 2 on bad flags.
//
// # Credentials
//
// A worker connects as its pool's role (bus.PoolRole: that pool's
// consumers and announcement subjects only) or as the any-pool worker
// role (bus.RoleWorker): --nats-creds takes a NATS .creds file, an nkey
// seed file or one "user:password" line. Without it, on a loopback
// --nats-url, the worker uses the credentials a dispatcher with
// --nats-listen made under its data directory (--data, default ./data):
// with --pool <name>, <data>/credentials/pool-<name>.nk if the dispatcher
// made it (--pools-credentials), else <data>/credentials/worker.nk, if
// they exist. --pool is checked before the worker connects as a pool's
// name that fits its type (bus.ValidPoolName, bus.CheckPoolName: a name
// ending in -<type> runs <type> tools only), as --config's pools are;
// the rule that such a name has no credential of its own
// (bus.ValidatePoolRoles) is the dispatcher's, which makes the
// credentials, so "--pool web-http" serving HTTP tools with the worker
// credential keeps its name, consumer and tools. On one machine this is for development: whoever reads
// that directory reads every credential and the signing key trusted for
// every pool. A pool's credential needs --pool: with it the worker dials
// with its pool's inbox prefix (bus.InboxPrefix of the pool's role, which
// the worker role may use too), without it with the worker role's. It
// attaches to the installation's streams as they are (bus.Options.Bind)
// and creates nothing: its pools' consumers are made by the dispatchers
// at its request (internal/registry, OpEnsure), at start and whenever
// the worker finds one missing or changed by hand.
//
// The connection is bus.Dial's (writes bounded to 1 s, PINGs every 3 s),
// with a bus.ConnMonitor that logs its disconnects, reconnects and changes
// of server and counts them (toolwire_nats_*_total on /metrics), and,
// once the worker has attached, a bus.Watchdog that moves it off a server
// that went silent or whose JetStream fails while another server answers
// (about 2 s; internal/bus, "The connection"). The watchdog stops before
// the drain.
//
// # Start-up
//
// A worker may start before NATS, or while its cluster has no JetStream
// leader (a rolling restart of the NATS nodes, a cluster that lost its
// quorum): connecting, attaching to the streams and starting the pools
// (or, with --ensure-only, ensuring them) are retried while the error
// says the cluster cannot answer yet (bus.Unavailable: no server
// reachable, a timed-out JetStream request, "JetStream system temporarily
// unavailable", no stream leader, too few peers), every 250ms at first,
// doubling up to 5s, with jitter, each retry logged at Warn ("NATS cluster
// not ready; retrying worker start-up", with the step and the error), for
// as long as the process runs; a signal ends the wait (exit 1, naming what
// it waited for). The HTTP server (--http) starts before the wait:
// /healthz answers while the worker waits, so startup and liveness probes
// pass, and /readyz answers 503 "waiting for the NATS cluster" until the
// worker serves. Once it serves, /readyz also answers 503 while a pool's
// consumer is missing or differs from what the worker declared, until the
// worker has put it back (internal/worker, "Pool consumers put back"). Other errors end the start-up at once: credentials
// refused, a pool overlapping another, a tool name another pool defines.
// Before, the worker exited on the first timeout ("bus: stream …: context
// deadline exceeded") and in Kubernetes crash-looped until the cluster
// recovered.
//
// # What a worker publishes
//
// A worker registers the tools of the pools it serves and nothing else:
// the native tools passed to Main only when it serves a native pool (the
// stock worker binary with --pools http registers no echo, fail, remember
// or sleep). A tool name another pool defines differently is refused at
// start-up with an error naming both pools (see internal/registry,
// "Sources"); replicas of one pool, and its next version in a rolling
// upgrade, publish freely.
//
// The worker never writes the registry itself (its credential may not):
// it announces each claim and spec to the dispatchers, a request on
// <prefix>.admin.registry.announce (registry.Remote), and a dispatcher
// checks it and writes it (internal/registry, "Announcements"): a spec
// whose version is not its content's, a tool of another executor type
// than its pool's, a name another pool holds are refused. While no
// dispatcher answers (no responders, a request that timed out), the
// announcement is asked again with backoff (100ms doubling up to 5s,
// with jitter), each retry logged at Warn ("no dispatcher answers the
// registry announcement; retrying"): a worker that starts before its
// dispatchers waits for them, alive and not ready.
package toolworker
