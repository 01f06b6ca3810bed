// Package toolctl is the toolwire command-line tool for operators and tool
// developers: call tools, submit calls, fetch, watch and cancel them, and
// inspect the tool registry, through a dispatcher's API with pkg/client;
// and list, show and retry dead letters through NATS with internal/dlq.
//
//	toolctl call echo '{"text":"hi"}'
//	toolctl submit sleep '{"duration":"10s"}'
//	toolctl get 01J... --wait 1m
//	toolctl output 01J... --grep 'FAIL|panic'
//	toolctl watch 01J...
//	toolctl cancel 01J... --reason "user gave up"
//	toolctl tools list --format openai
//	toolctl tools show echo -o json
//	toolctl dlq list --tool search
//	toolctl dlq show 42
//	toolctl dlq retry 42
//	toolctl policy apply policy.yaml --comment "ask before deleting"
//	toolctl policy explain fs_delete '{"path":"/srv/x"}' --agent bot
//	toolctl approvals list --state pending
//	toolctl approvals approve 01J... --for session --args-pattern path='/tmp/**'
//	toolctl approvals deny 01J... --reason "not on production"
//	toolctl grants list
//	toolctl store status
//	toolctl session list --state active --mode voice
//	toolctl session show s-42
//	toolctl session end s-42 --reason "the caller hung up"
//	toolctl session mode s-42 voice
//	toolctl pool pause mcp --reason "upstream incident"
//	toolctl pool list
//	toolctl pool resume mcp
//
// # Sessions
//
// The session commands (session.go) go through the API, for the
// credentials' tenant: `session list` (--state active|ended, --mode,
// --limit, default 100) pages through ListSessions and prints a table
// (session, state, mode, revision, updated, end reason) in the order of
// the sessions' last update, least recent first, and on stderr a note
// when more matched than --limit; `session show SESSION` the state, mode,
// flags, state values and log; `session end SESSION [--reason R]` ends it
// (EndSession, the admin scope): every later call naming it is refused
// SESSION_INACTIVE, and ending an ended session changes nothing; `session
// mode SESSION MODE` sets its mode (admin); `session apply CALL_ID`
// applies a finished call's intents. With -o json each prints the RPC's
// message.
//
// # Approvals
//
// A call the policy asks about is parked for an approver: call and submit
// print its id (the approval id) on stdout and, on stderr, why, until
// when, and the commands that approve or deny it (with the token, when
// one was issued), and exit 3; call --wait-for-approval waits for the
// approval and the result instead. `approvals list` (--state, --tool,
// --agent, --session, --limit) prints a table newest first, `show` one
// approval (arguments redacted by the tool's secret fields), `approve ID`
// runs the call, once or with --for session|agent|tenant as a grant
// (--args-pattern field=glob, repeatable; --tool glob; --ttl), `deny ID
// --reason` answers its caller PERMISSION_DENIED; `grants list` and
// `grants revoke ID` manage grants. They need the "approve" scope. watch
// shows the approval events (the approval id and expiry, who approved,
// for what, the reason).
//
// # Connection
//
// --server (env TOOLWIRE_SERVER, default http://127.0.0.1:8080, where a
// dispatcher with no configuration serves) is the dispatcher's API;
// --api-key (env TOOLWIRE_API_KEY) is sent as a bearer token. Flags win
// over the environment. --timeout bounds the whole command; a call's wait
// ends shortly before it, so a slow call still reports its id.
//
// The dlq, audit, replay and store commands talk to NATS instead, as the operator
// role (bus.RoleOperator): --nats-url (env TOOLWIRE_NATS_URL, default
// nats://127.0.0.1:4222), --nats-creds (env TOOLWIRE_NATS_CREDS: a NATS
// .creds file, an nkey seed file or one "user:password" line) and --prefix
// (env TOOLWIRE_PREFIX, default toolwire). Without --nats-creds, when every
// URL is on loopback, they use the operator credentials a dispatcher with
// --nats-listen made under its data directory: --data (env TOOLWIRE_DATA,
// default ./data), file credentials/operator.nk, if it exists; a refusal
// says how to give credentials. They dial with the operator's inbox
// prefix (bus.Dial: a write to a silent server gives up after 1 s; a lost
// or moved connection is printed on stderr as a warning; no watchdog, the
// commands are short), attach to the installation's streams read-only and never create
// or change one. `dlq retry` asks a dispatcher (over NATS; operators may
// not publish calls) to queue the dead call again as a new call with a
// fresh id (deadlines and idempotency key dropped; see internal/dlq) and
// prints the id.
// `audit` and `replay` take --archive (env TOOLWIRE_ARCHIVE): the
// installation's archive store, as the dispatchers' --archive names it (a
// directory or a URL, archive.OpenBucket). With it the record is the
// archive and the live streams as one (audit.Source.UseArchive): calls,
// results and events older than the streams' window are read from the
// archive, and `audit --verify` also verifies the archive's chains. The
// store is closed when the command ends.
// `dlq list` and `dlq show` redact secret arguments as `toolctl audit`
// does (dlq.Queue.Shown): fields the spec version's schema marks secret
// print as "[REDACTED]", their values are replaced in reasons and errors,
// arguments of a version no longer in the registry are redacted whole,
// and the raw bytes of an undecodable call are withheld. They read the
// registry bucket for the schemas.
//
// # Stores
//
// `store status` (store.go; NATS, as the operator, read-only: stream
// info only) prints every stream and bucket of the installation, and the
// JetStream account when it has a storage limit, as internal/capacity
// measures them: bytes and messages stored, their limits, the use of the
// nearer limit, and from two readings --sample apart (default 5s; 0 reads
// once) the net growth per second, the bytes the store took per call
// written to the calls stream, and the time until it is full at that rate
// ("full" when it is, grown or not: less room than its mean message, or
// for the calls stream, the idempotency bucket and the account past the
// dispatchers' 90% high-water, where new calls are refused; "never" when
// measured and it does not fill at this rate — not growing, or ageing out
// faster than it fills; "-" when unknown or unbounded), and the archive's
// lag ("-" until an archive reports one). The account's messages are not
// counted ("-", null). With -o text a table
// (STORE, BYTES, MAX BYTES, MSGS, MAX MSGS, USED, B/CALL, GROWTH/S, FULL
// IN, ARCHIVE LAG) and on stderr the span the rate was measured over;
// with -o json one object per store and line (store, stream, bytes,
// messages, maxBytes, fullAtBytes, maxMessages, used, measuredSeconds,
// growthBytesPerSecond, bytesPerCall, secondsToFull, archiveLagSeconds;
// null for what is unknown, unbounded or never). A prefix with no stream exits 2
// naming --prefix.
//
// # Policy
//
// The policy commands (policy.go; the "admin" scope; the tenant is the
// credentials') go through the API: `policy apply FILE` (--comment,
// --dry-run; "-" reads stdin) prints the version applied, "unchanged" or
// the dry run's verdict, and a refused document's problems one a line
// with their lines (exit 1); `policy show [--version V]` prints the
// document as applied on stdout and which version it is on stderr;
// `policy diff FILE` prints the unified diff from the document in force to
// FILE (policystore.Diff) and on stderr whether the rules differ or only
// comments and layout (it exits 0 either way); `policy history` a table
// of the applies, newest first; `policy explain TOOL [JSON]` (--agent,
// --session, --user, --run, --scopes, --approval, --spec-version,
// --policy-version, --mode) the outcome, the version, what decided, the layers,
// a table of every rule naming the tool (matched, effect, layer, id, line,
// why) with their reasons, and the grant or approval used. With -o json
// each prints the RPC's response. `audit` records carry the decision that
// allowed each call ("policy": version and rule, or grant or approval);
// `audit --rejected` prints the calls admission refused, with the policy
// version, rule and reason when the policy refused them (with --archive,
// those whose REJECTED events only the archive still holds too).
//
// # Output
//
// Results go to stdout, everything else to stderr. With -o text (the
// default) a successful call prints its content blocks (text as is, other
// kinds described in brackets; the structured output when there are no
// blocks), and its intents on stderr; a failed call prints
// "error: TYPE: message", one "  FIELD: message" line per offending
// field, and the suggestion and retry advice, on stderr. Either way, a
// call that took longer than its soft latency budget adds "note: took
// 1.2s, over its soft latency budget of 800ms (policy voice-retrieval)" on
// stderr (never a failure: the exit status is the call's). submit prints the
// call id. watch prints one line per event (time, type, attempt, worker,
// detail), then the result as get does; cancel prints the outcome
// (REQUESTED, ALREADY_FINISHED, UNKNOWN_CALL); dlq list prints a table.
// With -o json, call and get print the whole answer (call id, state and
// response envelope) as protobuf JSON, submit and dlq retry the
// SubmitResponse, cancel the CancelResponse, tools the specs and dlq show
// the DeadLetter; watch and dlq list print one JSON object per line. The
// exit status still tells the outcome.
//
// A result cut to the tool's output limits prints its marker line (how
// much is shown, and the command that reads on) and, on stderr, a note
// naming `toolctl output ID`. output prints a call's output text (its
// text blocks joined by newlines), all of it: --limit bytes (default
// 64 KiB, at most 1 MiB) from --offset, with a note on stderr giving the
// offset to read on from, or --all to the end; with --grep, the matching
// lines as NUMBER:TEXT. With -o json it prints each GetOutputResponse on
// a line. It exits as get does (3 for a running call, 1 for an unknown
// one or a bad pattern).
//
// get of a call in a delegation chain (text output) then prints its place
// in the chain on stderr (delegation.go; GetDelegation): its ancestors
// from the root down, the call, its direct children (at most 20, "and N
// more"), each as id, tool and state; a dispatcher that cannot answer
// GetDelegation leaves get as it was. get --tree prints only the chain,
// on stdout (-o json: the GetDelegationResponse), and exits 1 for an
// unknown call.
//
// # Pools
//
// pool list, pause and resume (pool.go) go through the API (ListPools,
// PausePool, ResumePool; internal/dispatch doc.go, "Paused pools"): a
// paused pool's workers take no calls on any replica, new calls are
// refused OVERLOADED, queued calls wait for the resume. list prints who
// paused a pool, since when, why, and a pause changed outside toolwire
// (CHANGED). Who, why and CHANGED are an admin's text or a hand edit's
// (the operator credential writes the consumer's metadata too), so list
// prints their control and format characters (ESC, bidi overrides) as Go
// escapes (printable), never raw to the terminal. A refusal (no such
// pool, a key without the "admin" and "installation" scopes, a reason
// over 512 bytes) exits 1.
//
// # The nats CLI
//
// nats-context writes a context file for the nats CLI (under
// $XDG_CONFIG_HOME/nats/context, default ~/.config/nats/context; --dir,
// --name, default "toolwire"; mode 0600): the server (--nats-url), the
// operator credentials (--nats-creds, or on a loopback URL the
// dispatcher's <data>/credentials/operator.nk, as the NATS commands
// above find them) and the inbox prefix the operator's permissions allow
// replies on. Without that prefix every request of the CLI times out:
// its replies are published to inboxes the operator may not subscribe
// to. It connects to nothing.
//
// # Exit status
//
//   - 0 (ExitOK): the call succeeded, or the command did what it was asked.
//   - 1 (ExitToolError): the fabric answered with an error — the tool
//     failed, the call was refused at admission (VALIDATION, NOT_FOUND,
//     PERMISSION_DENIED, ...), the tool, call id or dead letter named is
//     unknown (cancel: UNKNOWN_CALL), or the dead letter holds no call to
//     retry. cancel exits 0 for REQUESTED and ALREADY_FINISHED.
//   - 2 (ExitUsage): bad flags or arguments, including call arguments
//     that are not JSON (refused before anything is sent), or a request
//     that got no answer: the dispatcher or NATS is unreachable, refused
//     the credentials, has no installation with the --prefix, or
//     --timeout passed.
//   - 3 (ExitPending): the call was accepted but has no result yet (the
//     wait of call or get ended first, or it waits for an approver). It
//     keeps running (or waiting); its id is
//     printed on stdout, for `toolctl get ID --wait D`. A separate status,
//     so scripts can poll without parsing output.
package toolctl
