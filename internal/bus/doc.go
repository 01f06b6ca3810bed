// Package bus is where toolwire's JetStream layout is defined: it names
// every stream, bucket, subject and durable consumer, starts the embedded
// server, connects to an external one, and creates and checks every
// stream, durable consumer and bucket, idempotently, from Config. No other
// package creates one of them. What lives inside a store belongs to the
// package that writes it: the registry's keys (internal/registry), the
// sessions' keys (internal/intents), the idempotency keys
// (internal/dispatch), the blob names (internal/worker); and readers make
// their own short-lived ordered consumers (the dispatcher's results
// consumer and Watches, and Scans). The cancel bucket's key and value
// (CancelKey, Tombstone) are this package's, since dispatchers write them
// and workers read them.
//
// # Layout
//
// With the default prefix "toolwire":
//
//	stream TOOLWIRE_CALLS    toolwire.call.<type>.<tenant>.<provider>.<tool>   limits retention (the audit log)
//	                         toolwire.shadow.<type>.<tenant>.<provider>.<tool> replays, for shadow pools only
//	stream TOOLWIRE_RESULTS  toolwire.result.<tenant>.<dispatcher>.<call_id>   one terminal result per subject
//	stream TOOLWIRE_EVENTS   toolwire.event.<tenant>.<dispatcher>.<call_id>    lifecycle and progress, short retention
//	stream TOOLWIRE_DLQ        toolwire.dlq.<type>.<tenant>.<provider>.<tool>  dead letters
//	stream TOOLWIRE_RETRIES    toolwire.retry.{sched,due}.<call_id>.<attempt> long retry delays as message schedules
//	stream TOOLWIRE_ADVISORIES $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.TOOLWIRE_CALLS.*
//	KV     toolwire_cancels     <tenant>.<call_id>                              cancel tombstones with per-key TTL
//	KV     toolwire_idempotency sha256(tenant, key)                             idempotency keys, kept IdempotencyTTL
//	KV     toolwire_registry    <tool> and versions.<tool>.<version>            ToolSpec values
//	                            sources.<tool>, approvals.<tool>                the pool defining each tool, MCP approvals
//	KV     toolwire_sessions    <tenant>.<session>                              session states of the reference intent applier
//	KV     toolwire_revocations k.<keyed hash of an API key>                    dashboard sign-outs: sessions of the key issued before are ended
//	stream TOOLWIRE_DELEGATION toolwire.delegation.children.<tenant>.<call>     counters (AllowMsgCounter): a parent's children,
//	                           toolwire.delegation.descendants.<tenant>.<call>  a root's chain (internal/dispatch)
//	Object toolwire_blobs                                                       outputs over the inline limit
//
// Subject tokens from user input pass through Token, so `.`, `*`, `>` and
// white space never reach a subject.
//
// # Limits
//
// Every stream and bucket has a byte limit (Config.*MaxBytes; Stores
// lists them) and, where it makes sense, an age limit:
//
//	store        max bytes  max age        when full
//	calls        4 GiB      CallsWindow    refuses new calls (discard new): OVERLOADED
//	results      2 GiB      ResultsWindow  drops its oldest results
//	events       1 GiB      EventsWindow   drops its oldest events
//	dlq          128 MiB    DLQMaxAge      drops its oldest dead letters
//	retries      128 MiB    CallsMaxAge    drops its oldest parked retries (their calls are lost)
//	advisories   32 MiB     7 days         drops its oldest advisories (the reaper reads them at once)
//	cancels      32 MiB     CancelTTL      refuses new tombstones: Cancel fails
//	idempotency  128 MiB    IdempotencyTTL refuses new keys: keyed calls are refused OVERLOADED
//	registry     32 MiB     none           refuses new tool versions: a worker's start-up fails
//	sessions     32 MiB     CallsMaxAge    refuses new session states: applying intents fails
//	policies     32 MiB     none           refuses new policy documents: an apply fails
//	approvals    96 MiB     per key        refuses new approvals: an asked call is refused (fails closed)
//	limits       64 MiB     per key        refuses new counts: a call a limit covers is refused (fails closed)
//	tasks        32 MiB     24h            refuses new MCP tasks: a task-supporting call waits for its result instead
//	revocations  8 MiB      per key, 25h   refuses new sign-outs: the dashboard says the sign-out did not take everywhere
//	delegation   32 MiB     CancelTTL      drops the counter changed longest ago (its parent's or chain's bound restarts from 0)
//	blobs        248 MiB    ResultsMaxAge  refuses new outputs over the inline limit
//
// No store may fill on the path of an admitted call: a dispatcher refuses
// new calls with OVERLOADED once a discard-new store they may write
// (Store.Use: calls, idempotency) is past 90% of its limit
// (internal/poolview, "Overload"), so the last 10% is for the calls
// already admitted; a discard-old store drops old messages rather than
// refuse a write and never refuses a call; blobs are copies a worker may
// go without (a cut response keeps its result). The limits sum to 8 GiB
// (ReservedBytes), which the server reserves for the layout: each store
// can fill only itself, never the server's store under another (unbounded
// streams shared the server's, and a full one made CALLS fail). A server
// whose max_file_store cannot hold the reservation refuses the layout,
// and Open says what to change (IsStorageExhausted). -1 makes a store
// unbounded, which brings that risk back.
//
// Sized by the window: with Config.DesignRate (dispatchd --design-rate,
// calls a second) the stores every call writes — calls, results, events
// — and the idempotency bucket, each whose limit is not given, hold
// their window at that rate (SizedFor): 512, 512, 384 and 400 bytes a
// call (the soak's small calls with room to spare), over the window (an
// archived stream's plus the archiver's 6 h hold; the keys' TTL), with a
// quarter of headroom, never below the fixed default. By the same
// figures the fixed defaults hold a 168 h window with an archive at
// about 5.4 calls a second (results bind first; events 8 over their
// 72 h, calls 11) and 0.4 keyed calls a second, without one (720 h; events 72 h) about
// 1.3 (results; calls 2.6) and 0.1 keyed. A calls stream or idempotency
// bucket too small for its window refuses all calls or keyed calls
// OVERLOADED before it fills, never INTERNAL; results and events drop
// their oldest (with an archive, archived first: internal/dispatch
// refuses calls while they are not); toolctl store status and the store
// alerts show it coming. The reservation grows with the
// sizes (60 calls a second over 168 h reserve about 70 GiB), so the
// server's max_file_store must hold it: Open says so when it does not.
//
// The calls, results and events streams keep CallsMaxAge, ResultsMaxAge
// and EventsMaxAge — unless an archive keeps the record
// (RetentionWindow, dispatchd --retention-window): then they keep the
// window (CallsWindow, ResultsWindow, EventsWindow), and the archive what
// is older. The window sets nothing else: sessions, retries, dead
// letters, blobs (outputs over the inline limit, which the archive does
// not copy: an archived result's blob reference lasts as long as the
// blob store keeps it, ResultsMaxAge) and approval records keep the ages
// of CallsMaxAge and ResultsMaxAge, 720h by default. Only the idempotency
// keys follow the window (IdempotencyTTL's default and bound). With an
// archive the byte limits of the discard-old results and events streams
// must hold the window's messages: full, they drop their oldest ones
// whether archived or not (internal/archive, "How JetStream drops only
// what is archived").
//
// # Settings that differ from the live server
//
// The configuration wins. Open creates or updates every stream and
// bucket, and EnsurePool every pool consumer, from the configuration; an
// edit on the server (nats stream edit) is put back at the next start of
// a dispatcher; a pool consumer is put back by its running workers within
// seconds (internal/worker, "Pool consumers put back"; CheckPool is their
// comparison). A pool consumer carries the stamp of what it declares
// (PoolStampKey: PoolStamp, a hash of every setting but its name, filters,
// metadata and pause; PoolByKey: the declaring build). A pool paused by an
// administrator (PausePool, ResumePool: poolpause.go) is paused on its
// consumer (PauseUntil: it delivers nothing to any worker), with the
// record of who paused it, when and why in the consumer's metadata
// (written first, then the pause; read back, and done again when another
// replica's write undid it, up to three times, else ErrPauseOverlapped);
// EnsurePool keeps a recorded pause, and a pause without a record (nats
// consumer pause with the operator credential) or a record without its
// pause is a hand edit (CheckPool), put back to the record. Settings that hash to
// their own stamp are some replica's whole declaration, which another
// replica with other settings (a rolling upgrade) leaves in place;
// settings that do not, or no stamp, are a hand edit, put back. It is
// not put back silently: each store's and consumer's settings are read
// before the update, and every setting the update changed is logged at
// warn with the live and the configured value ("max_bytes: 1048576 →
// 2147483648"; a pool's filters, which only ever grow, are not counted).
// To change a setting for good, change the configuration: the dispatcher's
// --stream-max-bytes and the like. Workers bind (Options.Bind) and change
// no store, so they log nothing for stores. Two exceptions, so that a
// dispatcher's start never drops what no archive holds: a stream's
// MaxAge that the archiver raised to keep messages it has not archived
// yet, marked with ArchiveHoldMetadata (until when the hold stands), is
// kept while the mark stands; and with an archive (RetentionWindow) an
// archived stream's longer MaxAge is never lowered at open — turning the
// archive on, or shortening the window, leaves the live history in
// place, and the archiver lowers the MaxAge to the window once it has
// archived every message older than that (internal/archive, "How
// JetStream drops only what is archived").
//
// # The read-only view
//
// The operator's tools (audit, dlq, replay) attach through OpenView: it
// looks the streams CALLS, RESULTS, EVENTS and DLQ and the registry
// bucket up once and changes nothing, so a tool never rewrites an
// installation's limits with its defaults. A missing stream is
// ErrNoInstallation (the prefix is wrong), naming every stream missing; a
// registry that cannot be read is left to the tool (View.RegistryErr: the
// DLQ then fails closed on what it shows, audit and replay refuse).
//
// # Decisions
//
//   - CALLS uses limits retention, never work-queue: acknowledged calls stay
//     for the audit until CallsMaxAge. Its size is bounded by CallsMaxBytes
//     with discard-new, so a full stream rejects new calls explicitly
//     (OVERLOADED) instead of silently dropping old, unexecuted ones.
//   - The default limits (above) sum to 8 GiB so that the layout fits the
//     Helm chart's bundled NATS (max_file_store 9 GiB) and the embedded
//     server (16 GiB): calls half of it, results half of the rest, as the
//     audit log's two halves; the stores of small records get tens of MiB.
//     Results, events, dead letters, retries and advisories keep
//     discard-old (retries need it for message schedules), so that an
//     admitted call's write never fails for want of room; buckets and the
//     object store are discard-new (nats.go makes them so).
//   - The duplicate window (DuplicateWindow, default 10m) is at least the
//     dispatcher's retry horizon; Nats-Msg-Id is the call id
//     (<call_id>-r<attempt> for a retry the mover puts back). Idempotency
//     keys live in their own bucket for IdempotencyTTL, which follows the
//     calls' retention: by default, and at most, CallsWindow (CallsMaxAge,
//     or RetentionWindow with an archive: a key is useful only while its
//     call's live record exists); at least
//     DuplicateWindow (Validate refuses less), so that a key outlives
//     every publish of its call. StoreFull tells a write refused for want
//     of space: the store's own limit (10077, "maximum ..."), the
//     account's JetStream storage (10002) or the server's (10023; 10047
//     and 10028 for a reservation).
//   - Pool consumers are durable pull consumers created with
//     DeliverNewPolicy (DeliverAll on a limits stream would re-run history;
//     the policy cannot change later) and explicit acks, filtering exactly
//     the tools the pool serves (ToolSubject). The dispatchers create them
//     at a pool's worker's request before its tools are registered, so no
//     call is admitted before a consumer for it exists. Overlapping pools are refused (ErrPoolOverlap): on a
//     limits stream both would run every call. A pool is live or shadow,
//     never both: EnsurePool refuses shadow filters on a consumer that
//     has live ones and the reverse (ErrPoolKind, IsShadowFilter), so
//     that live workers never run replays nor shadow workers live calls.
//   - A pool consumer is a durable named <prefix>_pool_<pool>
//     (Config.IsPoolConsumer). Every other consumer of CALLS (an audit's
//     or a replay's ordered consumer, an operator's export) runs no call:
//     EnsurePool ignores it, so it never blocks a pool, even left behind by
//     a process that died. Before, an audit's leftover consumer made every
//     pool start-up fail "pools overlap" for the 5 minutes of its
//     inactivity threshold. One-off reads use a Scan: like an ordered
//     consumer it makes a server consumer per fetch, starting after the
//     last message returned, and deletes each one it replaced and the
//     last when it ends (otherwise they expire after ScanInactive, 1m).
//     Its consumers are named after ScanSlots fixed slots
//     (ScanConsumer: scan_0 … scan_7; a slot another scan holds is
//     skipped, and with all eight taken a random name is tried, which
//     only the dispatchers may create), so that the operator role needs
//     no wildcard consumer name (below). A scan given a NamePrefix (the
//     dispatchers' calls index) takes no slot, so dispatchers never
//     crowd operators out. Since scans share the slot names, a scan
//     deletes a consumer only while it is its own: its nonce in the
//     consumer's metadata, and less than half the inactivity threshold
//     since it was made. A scan whose caller paused past the threshold
//     (toolctl audit | less) thus never deletes the consumer another scan
//     made in its slot meanwhile; it leaves its own, if still there, to
//     expire. Left open: a consumer deleted by hand and its slot taken by
//     another scan in the milliseconds between the info and the delete,
//     or a delete the server holds for half the threshold; either costs
//     the other scan at most the fetch it was making (each fetch makes a
//     new consumer), which fails and its caller reports.
//   - The dispatchers share two durable consumers, made by EnsureReaper
//     (<prefix>_reaper on the advisories stream: MaxDeliver advisories,
//     from the first) and EnsureMover (<prefix>_retry_mover on the retries
//     stream: due retries, from the first), so each message is handled by
//     one replica. The cancel bucket's values are Tombstones (JSON).
//   - Unavailable tells start-up errors worth waiting out (no server
//     reachable, a request timed out or found no responder, JetStream
//     unavailable or without a leader, too few peers) from final ones;
//     workers retry their start-up on them (pkg/toolworker).
//   - Reads only a stream's leader answers (LastMsgFromLeader,
//     AllMsgsFromLeader) are sent again every second (leaderAttempt) while
//     nobody answers or a member says the stream has no leader, until
//     their context ends: after a leader dies the stream has none for the
//     servers' election timeout (4 to 9 s), and a request sent meanwhile is
//     never answered; it used to hold a worker's slot for its whole 10 s
//     context although the new leader answered seconds before. Their
//     wildcard filters are resolved only from the leader's stream info:
//     without a leader every member answers info from its own store, and
//     a lagging one listed no subject for a STARTED event the leader had
//     stored, so a redelivery ran a tool that is not safe to rerun again.
//   - A connection leaves a silent server within a second on a cluster
//     (about half a second for a dispatcher) when another server answers,
//     in about 2 s when none answers fast, 6 to 9 s at worst, never
//     nats.go's minutes ("The connection", below).
//   - MaxDeliver advisories are captured in a stream, since they are core
//     messages lost when nobody listens; the dispatchers' reaper ends the
//     calls they name.
//   - The embedded server never installs signal handlers (NoSigs), always
//     has an explicit store directory and limits, and syncs to disk every
//     SyncInterval (default 1s, not the server's 2m: a longer interval can
//     lose acknowledged writes on power loss). SyncAlways trades throughput
//     for no loss window at all.
//   - EncryptionKey encrypts the embedded server's store at rest
//     (nats-server's JetStreamKey; ChaCha20-Poly1305 or AES-GCM): the calls
//     stream stores arguments, secret ones included, in clear otherwise. A
//     key shorter than MinEncryptionKeyBytes is refused, errors never show
//     it, and a store written in clear is encrypted when the server first
//     starts with a key. A lost key makes the store unreadable.
//   - Open creates or updates the layout (dispatchers); with Options.Bind
//     it looks it up and creates only what is missing (workers: their
//     credentials may not manage streams, and a worker's defaults must not
//     rewrite the limits a dispatcher set), except the revocations bucket,
//     which only the dispatchers' dashboard uses, and the delegation
//     stream, which only the dispatchers' admission uses: Bind leaves them
//     alone (Bus.Revocations and Bus.Delegation are nil) and RoleWorker
//     has no grant on them. Open creates them last, after the blobs
//     store, so that an upgrade that moves bytes from an existing store to
//     a new one fits a server whose max_file_store is exactly the
//     reservation (every limit that goes down is applied before a new
//     store takes its share): blobs gave 8 MiB to revocations and 32 MiB
//     to delegation.
//   - The delegation stream is a counter stream (nats-server 2.12+,
//     AllowMsgCounter): a publish with the Nats-Incr header adds to its
//     subject's counter and the PubAck carries the new value, so that a
//     dispatcher adds a delegated call to its parent's and its chain's
//     counts and reads them in one request each (AddToCounter; nats.go
//     v1.55 has no client API for it). The stream's leader applies the
//     increments of a subject in order: two replicas racing for a
//     parent's last place get two different counts. It replaced listing
//     the limits bucket's keys under the parent and the root at every
//     delegated admission (an ordered consumer each time, O(children)
//     keys: quadratic for a parent with many children). A counter stream
//     takes no per-message TTL and no discard-new, and the setting cannot
//     be turned on for an existing stream: hence a stream of its own,
//     with MaxAge CancelTTL (a counter left alone that long expires
//     whole, as the keys it counts do), MaxMsgsPerSubject 1 and
//     discard-old. Full, it drops the counter changed longest ago —
//     whichever tenant's — whose bound then restarts from 0 (fails open
//     for that parent or chain). A counter is about 140 bytes (measured,
//     tenant "default"), so the 32 MiB hold about 240,000 counters:
//     120,000 delegated calls a day at two counters each (every child of
//     a different root, the worst case; a parent's children share one),
//     a little less than the limits bucket holds of their keys (about 430
//     bytes each in 64 MiB, about 156,000, besides every other count). In
//     that worst case the counters fill first; size the delegation store
//     with the limits bucket (--stream-max-bytes delegation=SIZE). The
//     32 MiB came from the blobs store (280 → 248 MiB), whose outputs are
//     copies a worker may go without. Every attempt to delegate touches
//     its counters (a refused one adds and takes back), so a parent or
//     chain still asked for children keeps its counter alive past
//     CancelTTL; a place never taken back (a dispatcher that died between
//     the two) stays taken as long.
//
// # The connection
//
// Dial connects to an external cluster (the embedded server's in-process
// connections never leave their server) and reconnects for ever. A
// server can fail a connection without closing it — a frozen process, a
// cut link, a server cut from its cluster but not from its clients — and
// three things make the connection leave it (connect.go, watchdog.go):
//
//   - A write is bounded: nats.go's flusher gives up on a Write after 1 s
//     (FlusherTimeout; nats.go's default is a minute, during which it holds
//     the connection's lock and every publish, request and PING of the
//     process waits), and a failed write reconnects at once
//     (ReconnectOnFlusherError).
//   - PINGs every 3 s, 2 outstanding: a server that answers none is left
//     after 6 to 9 s, whatever the traffic and on every connection.
//   - A Watchdog (a startstop.Service; dispatchers and workers run one on
//     their connection to a cluster) probes the connection's server every
//     500 ms: a PING, then a JetStream API request (the calls stream's
//     info, answered by its leader), each within 1 s. After 2 failed
//     probes in a row (no PONG; or no responders, a timeout, a 5xx such
//     as 503 "JetStream system temporarily unavailable", a stream without
//     a leader, or a leader that has not heard from a majority of its
//     replicas for 3 s: one cut from its peers answers as the leader
//     until it steps down) it probes the pool's other servers on short-lived
//     connections of their own (the name with " (watchdog probe)", the
//     same credentials, dialer and inbox prefix; a server the cluster
//     advertised gets the configured URL's credentials and TLS name)
//     — probed alongside the current server's last probe, so that an
//     election that ended meanwhile does not pass for a sick server — and
//     moves the connection to the first whose JetStream answered — or,
//     off a server that answered no PING, to the first that answered one —
//     through ForceReconnect steered by the ConnMonitor (nats.go's
//     ReconnectToServer), never to the server being left. When no other
//     server qualifies it stays: a cluster electing a leader fails every
//     probe, and a server whose peers are all gone is still the best one.
//     A server that stays quiet for Suspect (200 ms) is suspect: one that
//     answered the PING but not the JetStream request (a server cut from
//     its cluster but not from its clients, whose requests go to leaders
//     it cannot reach), or one that answered no PING and sent nothing at
//     all meanwhile (a frozen process, a link down). It is asked again —
//     a request sent while a leader was being elected is never answered,
//     the next one is — and the other servers are probed at the same
//     time; the first whose whole probe (a dial, a PING, the same
//     request) is answered while the current server leaves the new
//     request unanswered three times as long (and at least Suspect) wins
//     without waiting for the timeouts. A late PONG on a connection that
//     keeps receiving acknowledgements and messages is no suspicion: that
//     connection has much to send, and a fresh one would always look
//     faster. Dispatchers probe every 250 ms (AdmissionWatchdog), so
//     admission leaves such a server within about 0.7 s of its going
//     quiet.
//     Moves are rate-limited (3, then one every 30 s). Report lets a
//     caller that saw a request fail start the next probe at once. With
//     one server in the pool it does nothing. Measured: a connection
//     publishing steadily leaves a frozen server in 0.47 to 0.59 s, and in
//     about 2.2 s when the frozen server led the calls stream (no other
//     server's JetStream answers until the election ends, so the move
//     waits for the timeouts and goes to a server that answers PINGs)
//     (internal/faulttest TestClusterConnectionLeavesFrozenServer).
//
// Every connection Dial makes has a ConnMonitor: it logs each disconnect
// (warn; info for a move asked for), reconnect (info; warn when it landed
// on another server), failed write and other asynchronous error (warn),
// and the watchdog's moves (warn), with server URLs stripped of
// credentials, and counts them (Disconnects, Reconnects, ServerChanges,
// Moves), which telemetry.NewConnCollector exports as
// toolwire_nats_*_total. toolctl's short-lived commands have the bounded
// writes and the warnings, not the watchdog.
//
// # Authentication and permissions
//
// Every NATS client authenticates. The embedded server's client listener
// (EmbeddedConfig.ListenAddr) needs Users: StartEmbedded refuses a
// listener without any, on loopback or not, so there is never an open
// listener. In-process connections (Embedded.Connect) authenticate as an
// internal user with every permission whose nkey is made at start and
// lives in memory only, and which the server accepts on in-process
// connections only. An nkey, not a random password: the server warns of
// any plaintext password on every start, and bcrypt would cost every
// in-process connection a hash.
//
// Outside the dispatcher there are three kinds of role, each with the
// NATS permissions RolePermissions derives from the installation's prefix
// (the table is in docs/reliability.md, "NATS permission table"):
//
//   - PoolRole(name), one per pool ("pool-<name>"; the pools name and
//     name-<type>, PoolRoleMembers): attach to the layout (stream info
//     only), look up, fetch from and settle its own pools' consumers on
//     CALLS (named in each subject) and no other, read a redelivered
//     call's result and events, publish results, events, dead letters and
//     retry schedules, read and watch cancel tombstones, read the
//     registry bucket (never write, roll up or purge it), read approval
//     records, nonces, grants and the policies in force from their
//     buckets' leaders (the re-checks before a call runs; never written,
//     never watched), announce its tools and ask for its consumer on its
//     own pools' subjects (PoolRegistrySubject) only, write blobs, and
//     hear its own inboxes (InboxPrefix: under the worker role's,
//     ".pool.<name>") only.
//     A pool name that ends in "-<type>" is therefore always the <type>
//     part of the pool named by what precedes it (PoolPart): it has no
//     role of its own (ValidatePoolRoles refuses it) and runs <type>
//     tools only (CheckPoolName, in PoolConfig.Validate). Without a role
//     of its own (RoleWorker), such a name for <type> tools is a pool
//     name (ValidPoolName, CheckPoolName). ShadowRoleName ("shadow") has
//     no role either: it would reach the default shadow pools
//     (shadow-<type>), which replay any pool's tools; shadow workers run
//     with RoleWorker.
//   - RoleWorker: the same for every pool (any consumer of CALLS, any
//     pool's announcement subject, every worker inbox), and the bare
//     RegistrySubject, where the dispatchers refuse workers of the
//     release before (for one release): development and installations
//     with one pool, or pools that trust each other.
//
// No worker role creates, updates or lists a consumer: a pool's consumer
// is made by the dispatchers when its worker asks (internal/registry,
// OpEnsure), which check that its subjects are the pool's own tools' and
// run EnsurePool.
//   - RoleOperator: see the layout's metadata (stream and consumer info,
//     the account's stream names: the nats CLI's stream and consumer
//     listings), read CALLS, RESULTS, EVENTS, DLQ and the registry (Scans,
//     direct gets, and gets from the leader of RESULTS and the registry),
//     request a dead-letter retry from a dispatcher
//     (DLQRetrySubject), publish replays on shadow subjects and hear
//     their results. It reads, retries and approves, and changes nothing
//     else: its only consumers are the Scan slots of CALLS and DLQ
//     (create, fetch, delete: named in the subject, so never a pool's
//     consumer, which it can neither update, delete nor fetch from).
//
// None may publish a call, manage a stream or bucket, read CALLS by
// direct get, or subscribe to call subjects or another role's inboxes:
// each role's connections use InboxPrefix(cfg, role), and may subscribe
// to those inboxes only. A retry schedule names the calls stream sequence
// of the call it retries (RetryOfHeader), which the dispatchers' mover
// checks, so retry schedules cannot queue calls of a worker's making.
//
// What permissions cannot express: a consumer's filters and deliver
// subject travel in the create request's body, which permissions cannot
// see — which is why no worker role may create a consumer, and the
// dispatchers check a pool's subjects before they make its consumer;
// which tools a pool holds is the registry's (its sources), checked by
// the dispatchers; result and event subjects are per call id, so a worker
// credential may store a result for any call whose id it knows — which
// is why every result and event is signed (Bus.Signer, internal/signing)
// and a call's answer is only a result signed by a key enrolled for its
// tool's pool (internal/believed); the pool a worker announces tools for
// is one its signing key is enrolled for and, with a pool's role, one of
// its own (internal/registry checks the rest). docs/reliability.md lists
// these.
//
// # Credentials files
//
// EnsureCredentials keeps one nkey seed per role, and per pool it is
// given (PoolRole: pool-<name>.nk), in a directory (0700, files 0600,
// made once, reused, refused when group or others may read them); a dispatcher with a listener keeps them under
// <data>/credentials (CredentialsDir, CredentialsFile). ConnConfig's
// CredsFile takes such a seed file, a NATS user credentials file (JWT and
// seed), or one "user:password" line (the Helm chart's bundled NATS);
// errors name the file, never its content. LocalCredentials finds a role's
// seed under a data directory when every server URL is on loopback: how
// toolctl and the worker find theirs on the dispatcher's machine (a
// worker with --pool its pool's first). RemoveStalePoolCredentials removes
// the seed files of pools no longer given, so that such a worker falls
// back to the worker role's instead of a credential the server refuses.
// On one machine none of this isolates a pool: whoever reads the
// directory reads every role's seed.
package bus
