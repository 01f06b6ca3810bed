// Package dispatchd is the dispatcher process (cmd/dispatcher): Main
// parses its flags and Run assembles and runs it — the embedded NATS
// server or a connection to an external cluster, the listener's
// credentials, the data directory's lock, the in-process worker pools,
// the registry, the dispatcher core (internal/dispatch) and the HTTP
// server — and stops it in order. The core knows none of this: it imports
// no worker, worker configuration or executor package, so that it can be
// embedded, tested and benchmarked on its own.
//
// # Serving
//
// Run serves the API (internal/api's Service) with /healthz, /readyz (registry
// loaded, NATS connected, streams present) and /metrics (Prometheus: the
// dispatcher's, the in-process workers', the pools' lag and the DLQ
// depth) on one listener (default 127.0.0.1:8080) speaking HTTP/1.1 and
// unencrypted HTTP/2 (h2c), with a 10s ReadHeaderTimeout, a 2m
// IdleTimeout for keep-alive connections (without it an idle connection
// would be closed after the ReadHeaderTimeout, and clients under load
// would open a connection per call) and no other server timeout, so long
// waits and watches are not cut off. Every route's
// body is bounded while read (api.LimitBody with the dispatcher's
// MaxRequestBytes), not only the API's. With tracing on, a caller's
// traceparent parents the admission span, and the call's trace context
// travels to the worker in the message headers. Without an API key file
// every caller is identity.Default, and Run logs a warning when
// its listener is not loopback.
//
// # NATS
//
// Run uses the embedded NATS server (store under <DataDir>/jetstream) unless
// NATSURL names an external cluster. One process holds a data directory at
// a time: Run takes an exclusive lock on <DataDir>/dispatcher.lock (the
// file names the holder's pid and API address) before it opens anything,
// and a second dispatcher on the directory gets ErrDataDirInUse naming the
// holder. The embedded server's client listener
// (NATSListen) always requires credentials: on its first start with one,
// Run makes an nkey per role (bus.RoleWorker, bus.RoleOperator) and one
// per pool of PoolsCredentials (--pools-credentials; bus.PoolRole:
// pool-<name>.nk, that pool's consumers and announcement subjects only)
// under <DataDir>/credentials (directory 0700, files 0600;
// bus.EnsureCredentials) and reuses them on later starts, removing the
// files of pools no longer listed (bus.RemoveStalePoolCredentials,
// logged: a local worker of such a pool would pick its file first and be
// refused); it logs the files' paths, never their
// content, and warns when the listener is not on loopback (NATS traffic is
// not encrypted). The dispatcher and its in-process workers connect in
// process with every permission. NATSEncryptionKey encrypts the embedded
// store at rest; it is a reference (file:/path or env:NAME), never the key.
//
// On an external cluster the connection is bus.Dial's, with a
// bus.ConnMonitor (its disconnects, reconnects, changes of server and
// moves logged under component=nats and counted as toolwire_nats_*_total
// on /metrics) and a bus.Watchdog, the first service of the process's
// group (stopped last, before the drain), that moves it off a server that
// went silent or whose JetStream fails while another server answers
// (internal/bus, "The connection").
//
// # In-process workers and the stop
//
// Run starts in-process worker pools
// (default every type with the embedded server, none with an external one)
// from WorkerConfig (the worker's YAML; see internal/workerconfig) or,
// without one, the default configuration (below). It stops in order: HTTP (the
// MCP endpoint hears the other replicas' notifications/cancelled until
// the requests in flight have drained), the in-process workers
// (in-flight calls finish within Grace, 25s), the dispatcher (waiting
// callers released with dispatch.ErrStopped; they fetch their results
// later by id; its goroutines waited for, at most Grace), the registry
// watcher, the NATS connection (drained), the embedded server. A closed
// Hurry (Main: a second SIGTERM or SIGINT) ends the wait for the calls in
// flight at once: they are handed back for redelivery. Main parses
// the flags (each also TOOLWIRE_<NAME>, see internal/cliflag) and exits 0
// after a clean stop, 1 on a runtime error and 2 on bad flags.
//
// # Policy
//
// Run starts a policy holder (internal/policystore) before the dispatcher
// and hands it over as dispatch.Config.Policies, so the first call is
// decided by the documents in force; it stops after the dispatcher.
// PolicyFile (--policy) is read and parsed before anything starts (a
// syntax or condition error stops the start at once), then, once the
// registry is loaded, applied as the installation document with its tests
// run against the registry's specs; a refusal is a *PolicyError naming
// the file and the lines, which Main prints and exits 1 with. The same
// document at the next start changes nothing; a replica started with
// another file puts that one in force for every replica (the installation
// document is one for the installation), so give every replica the same
// file.
//
// # Approvals
//
// --approval-ttl (default 24h) is how long a call an ask decision parked
// waits for an approver before it expires; --grant-ttl (default 24h) the
// life of a grant whose approver gave none. --approval-token-keys FILE
// turns the token form on: the file holds "id:base64key" lines (at least
// 32 bytes a key, mode 0600 or stricter, at most 64 KiB); the first key
// signs, every key verifies. Every replica must read the same keys; a
// rotation is done in rolling steps (add the new key second, roll out;
// move it first, roll out; remove the old key once the tokens it signed
// have expired, roll out). A bad file stops the start; the keys are never
// logged (only their ids and count).
//
// # The default configuration
//
// Without WorkerConfig the in-process workers serve the built-in
// examples of every executor type: the spec files of defaultspecs,
// embedded in this package (the sandbox tools sha256 and grep_lines, and
// the HTTP tool toolwire_catalog, which calls the dispatcher's own API
// through the vars TOOLWIRE_HTTP and TOOLWIRE_HTTP_PORT, so it works
// offline) and, when node is on PATH and the reference server is
// installed (`make mcp-everything`, or TOOLWIRE_MCP_EVERYTHING naming its
// dist/index.js; EverythingIndex), the MCP reference server over stdio.
// An executor that cannot start on this host is logged and its calls
// answered PERMANENT (workerconfig.Options.BestEffort); what the
// configuration leaves out, Run logs at Info.
package dispatchd
