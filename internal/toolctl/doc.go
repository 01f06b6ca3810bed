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
// The dlq, audit and replay commands talk to NATS instead, as the operator
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
// `dlq list` and `dlq show` redact secret arguments as `toolctl audit`
// does (dlq.Queue.Shown): fields the spec version's schema marks secret
// print as "[REDACTED]", their values are replaced in reasons and errors,
// arguments of a version no longer in the registry are redacted whole,
// and the raw bytes of an undecodable call are withheld. They read the
// registry bucket for the schemas.
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
// --policy-version) the outcome, the version, what decided, the layers,
// a table of every rule naming the tool (matched, effect, layer, id, line,
// why) with their reasons, and the grant or approval used. With -o json
// each prints the RPC's response. `audit` records carry the decision that
// allowed each call ("policy": version and rule, or grant or approval);
// `audit --rejected` prints the calls admission refused, with the policy
// version, rule and reason when the policy refused them.
//
// # Output
//
// Results go to stdout, everything else to stderr. With -o text (the
// default) a successful call prints its content blocks (text as is, other
// kinds described in brackets; the structured output when there are no
// blocks), and its intents on stderr; a failed call prints
// "error: TYPE: message", one "  FIELD: message" line per offending
// field, and the suggestion and retry advice, on stderr. submit prints the
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
