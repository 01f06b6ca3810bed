// Package faulttest is toolwire's fault harness: it builds and runs real
// processes — worker binaries and a nats-server built from the pinned
// module — drives load through a dispatcher, injects faults (kill -9,
// SIGTERM, SIGSTOP, server restarts, links cut or flapping and one-way
// routes between network namespaces), and checks a ledger in the manner of
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
// NewClusterWith takes the layout and the dispatcher's configuration (an
// archive store, windows, metrics). KillDispatcher ends the dispatcher as
// a kill -9 would, as far as the rest of the system sees: its connection
// is closed without a drain (publishes and acks in flight lost, its
// archiver's lease left to expire), then what it started is stopped so
// that its goroutines end; StartDispatcher starts a new one with the same
// name, configuration, signing key and archive store, as a restarted
// replica (RestartDispatcher: both). A dispatcher process of its own is
// not possible here: dispatchd refuses a window under 4 × 1h segments.
// Current is the running dispatcher, for loads that run across restarts.
//
// TestSoakRetentionWithArchive is issue 29's compressed-time soak, in
// make test for SOAK_DURATION's default (90 s of load, three windows) and
// in make soak for 10 minutes: a 30 s retention window, 5 s archive
// segments into a directory store, byte limits sized by the window
// (docs/reliability.md, "The record lasts"), an open load of SOAK_RATE
// calls/s (80; a quarter with idempotency keys, some repeated), a worker
// killed every eighth of SOAK_DURATION and the dispatcher every third
// (KillDispatcher: each kill leaves no goroutine behind, goleak). It
// asserts no refusal or error caused by storage; every accepted call
// audited once over archive and live, with a terminal outcome and its one
// result message (the tool that is not idempotent run at most once); an
// audit with Verify over the whole record, archive and live, without
// anomaly and agreeing call for call with the audit without it; every
// chain verified, no segment recording messages dropped before they were
// archived; the streams within their limits and their window; results
// the live stream no longer holds answered from the archive (up to 100
// read through the dispatcher); and the test process's memory under
// 2 GiB. A FIGURE line gives the figures.
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
// # Network partitions
//
// NewClusterNetns is NewCluster3 with every process in a Linux network
// namespace of its own, made with the ip binary (NewNet; run as root; ip
// is always given an argument list, never a shell): a hub namespace
// holding a bridge (10.213.7.1/24), and members joined to it by a veth
// pair each — the nodes n0, n1, n2 (10.213.7.10-12, each listening on
// 4222, 6222 and 8222 of its own address), the workers (.20; StartWorker
// runs them there with `ip netns exec`) and the dispatcher (.30). The
// dispatcher runs in the test process as elsewhere, but its NATS
// connection is made from its namespace: a nats.CustomDialer (Netns.Dial)
// moves a locked thread into the namespace (setns on /run/netns/NAME),
// makes the socket there (a socket keeps the namespace it was made in)
// and moves the thread back; a thread that cannot go back is never used
// again (it stays locked and ends with its goroutine). The 10.213.7.0/24
// addresses exist only inside these namespaces; each run has its own
// bridge, so runs at once do not meet, and nothing is ever sent outside.
//
// The harness observes from the hub: WaitHealthy, MetaLeader, ClientIPs
// and WatchLeader ask the nodes' monitoring ports over the bridge, each
// request on a connection of its own (no keep-alive), so a node that went
// silent costs a request its timeout and never freezes the harness. The
// hub reaches every node whose link is up, whatever the blackholes (they
// are between nodes). What goes through the dispatcher's own connection
// (StreamLeader, Leads, Elections, ResultCounts) is asked before a fault
// or after the heal.
//
// Faults (Net): LinkDown and LinkUp set the hub's end of a member's veth
// down and up — the member loses its carrier, nothing passes either way,
// and nobody is told (no RST, no FIN: what was in flight stays
// unacknowledged); Blackhole adds blackhole routes inside one member's
// namespace to others' addresses — it can no longer send to them, they
// can still send to it, and it still talks to everyone else (both ways:
// a symmetric partition from its peers, its clients unaffected);
// Flap takes a link down and up a number of times, the first before it
// returns, the rest in a goroutine the test owns (Flapper.Wait, Stop).
// Cluster.DispatcherNode is the node the dispatcher's connection is on
// (its ConnectedServerName); WatchLeader follows from the hub when a node
// other than the old leader leads a stream after a fault (its
// leader_since), the election part of a failover.
//
// Names are "twft-<pid>-<hex>-<role>": the test process's pid and a
// random suffix, so tests running at once never share one. Every
// namespace of a Net is deleted in a t.Cleanup registered before any
// process starts (so it runs after they were killed), also after a failed
// test; the veth pairs and the bridge go with the namespaces. A run
// killed before its cleanup leaves its namespaces, and its nats-servers
// and workers still in them (they run in process groups of their own);
// the next NewNet deletes every namespace whose pid is gone and kills
// the processes in it, and leaves those of a run still going alone
// (TestNetStaleNamespacesSwept).
//
// TestNetFaults checks the faults themselves on two namespaces with a
// listener each (Netns.Listen): a dial across a link that is down times
// out (nothing answers), a one-way blackhole stops a TCP handshake both
// ways (one side's SYN or the other's SYN-ACK is dropped) and nothing
// else, and each heal restores the path.
//
// TestClusterPartitions (make test; 3 to 7 minutes alone) runs one
// cluster through five faults, each healed and the cluster healthy and
// the load flowing before the next, under an open load of 50 calls/s
// (a new caller every 20 ms whether or not the earlier ones were
// answered, alternately of Call and Submit, half of the tool that is not
// idempotent: a stall piles callers up as in production, it does not
// slow them down): the calls stream leader's link flapping (3 s down,
// 3 s up, four times), a one-way cut of the dispatcher's node (20 s),
// the dispatcher's node cut (link down, 20 s; meanwhile the dispatcher's
// connection keeps writing 64 KiB messages to a subject nobody reads, so
// that its socket's send buffer fills as on a busier dispatcher — this
// test's calls alone do not fill it before the PINGs notice the silence),
// a symmetric partition of the calls stream's leader from its peers
// (15 s), the workers cut for 12 s with an AckWait of 5 s. The leader hit
// by the flapping and the partition is first moved off the dispatcher's
// node (those faults are not the dispatcher's own). The calls made during
// each fault (from the end of the previous one) are checked as in
// TestClusterLeaderKills, with exact zeros; a call that ran although its
// caller got an error and no call id is a failure too. FIGURE lines give
// per fault the admission stall (the longest gap between accepted
// Submits from the fault until the cluster is healthy and the load flows
// again), the first answer to a call made after the fault, the calls
// stream's election (WatchLeader, stopped at the heal; "none" when the
// fault did not cost the stream its leader: a 3 s link loss is shorter
// than the servers' election timeout), toolwire's share of the failover
// (the stall minus that election), callers not answered or answered late,
// and the UNKNOWN_OUTCOME answers by what the ledger knows (the tool
// completed, never ran, started without an end). A node whose /healthz
// still fails 45 s after a heal is restarted (WaitHealthyOrRestart) and
// reported in a FIGURE line: nats-server v2.15.2 was seen retrying a RAFT
// catch-up of the events stream for minutes after a flapping link or a
// one-way cut, which the test cannot wait out, and the next fault needs
// three healthy nodes. When the restarted node still cannot catch up the
// stream its /healthz names, that stream's leader steps down (seen: the
// restart alone was not enough once in a CI run), as an operator would.
// Stuck nodes are restarted one at a time, each given a minute before the
// next is looked at: on a loaded machine all three were still catching
// up 30 s after a heal, and restarting all three together left the
// cluster unhealthy for over a minute (a CI failure, 2026-12-02).
//
// # Decisions
//
//   - The cluster scenarios (TestCluster*) are not parallel with each
//     other: three servers, workers and the load saturate a 2-core
//     machine, and an election under starvation takes longer than the
//     bounds the scenarios log. TestClusterLeaderKills alone runs in
//     parallel with the soak and the single-node scenarios (after the
//     other cluster scenarios): each of the two is minutes of mostly
//     waiting, and together they cut about three minutes from the
//     package, CI's critical path (both passed side by side at a load
//     average of 12 to 19 on 2 cores, 2026-11-29).
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
