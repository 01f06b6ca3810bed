// Package faulttest is toolwire's fault harness: it builds and runs real
// processes — worker binaries and a nats-server built from the pinned
// module — drives load through a dispatcher, injects faults (kill -9,
// SIGTERM, SIGSTOP, server restarts), and checks a ledger in the manner of
// Jepsen's queue checker: every accepted call has exactly one terminal
// result (lost = accepted − terminal = 0, duplicates = 0), and executions
// per call are counted by the tool itself outside NATS (the ledgerworker
// command).
//
// Scenarios are ordinary tests in this package; a new one starts the
// processes it needs with the helpers here and asserts on Ledger.
//
// # Two shapes
//
// NewCluster starts one nats-server process (streams with one replica)
// and a dispatcher in the test process; RestartNATS kills and restarts it.
//
// NewCluster3 starts three nats-server processes forming a JetStream
// cluster on loopback (client, route and monitoring ports chosen at
// random; each node a configuration file and a store directory of its own
// under t.TempDir(); routes PING every 2 s as in the Helm chart), and the dispatcher with the layout of ClusterLayout:
// three replicas, and byte limits of a few MiB per store so that each
// node's reservation (about 170 MiB) fits its max_file_store
// (ClusterMaxFileStore, 256 MiB) on a CI disk — the defaults reserve
// 8 GiB per node. The dispatcher and every worker are given all three
// URLs; workers also get --stream-replicas 3. Helpers: StreamLeader (the
// node leading a stream), Leads (what a node leads: streams, the calls
// stream's durable consumers, the meta group, a results consumer),
// KillNode and RestartNode (SIGKILL, then the same ports and store),
// StepDown, WaitHealthy (every node's /healthz, every stream a leader
// and two current replicas), Elections (how long after a fault each group
// a node led had a new leader, from the leaders' leader_since),
// ResultCounts (results per call id, one scan of the results stream). The
// dispatcher logs at debug level into DispatcherLog.
//
// # Decisions
//
//   - The cluster scenarios (TestCluster*) are not parallel: three servers,
//     workers and the load saturate a 2-core machine, and an election
//     under starvation takes longer than the bounds the scenarios log.
//     Figures are logged (FIGURE lines) for docs/reliability.md; the
//     asserted time bounds are generous (an admission stall under 20 s,
//     the first answer after a fault under 30 s) so that a loaded CI
//     machine does not flake, while the invariants (0 lost, 0 duplicate
//     results, 0 answers differing from the stored result, 0 refused
//     calls, 0 reruns of a tool that is not idempotent) are exact.
//   - A frozen node (SIGSTOP) stands in for a network partition or a hung
//     host: its connections stay open, so clients and servers notice it
//     only by missed PINGs and heartbeats, not by a closed socket.
package faulttest
