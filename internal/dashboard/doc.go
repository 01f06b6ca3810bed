// Package dashboard is toolwire's web dashboard: pages about tool calls
// (not raw streams — the nats CLI shows those), served by every
// dispatcher at /ui on its API address.
//
// # Parts
//
// A Server is built from a Config: the dispatcher as Core (core.go: the
// calls the pages make, each with the signed-in user's identity), the
// registry as Registry, and Streams, the streams and buckets the pages
// read (CALLS and RESULTS for the calls index, the registry bucket, an
// audit.Source, a dlq.Queue, the revocations bucket and the connection),
// all handed over by the process
// (internal/dispatchd). Start starts the calls index's feed and the pools
// page's sampling; Stop ends the live streams, then those two
// (startstop.Service).
//
// # Stack
//
// Server-rendered html/template pages and one small script (static/app.js:
// live rows over server-sent events, live regions, pause/resume, confirm
// steps), all embedded in the
// binary: nothing to build, no Node.js to build or run. The pages carry a
// strict Content-Security-Policy (no inline script or style, images from
// the page or data: URIs only, no framing).
//
// Times are written in UTC as <time datetime> elements (the ts template
// function); the script shows them in the browser's zone unless the
// viewer chose UTC (the header's toggle, kept in localStorage), and
// [data-tz] labels name the zone shown. The stylesheet follows the
// system's colour scheme (prefers-color-scheme: dark). Every page starts
// with a skip link to <main>; on every page the script reads keys
// outside fields: / (the page's search), j and k (next, previous row with
// a link of any table.grid), p (pause or resume live updates, on a page
// that has them). A version's time inside a <select>'s option is plain
// UTC text, named so (a <time> tag is dropped there). Every page, light
// and dark, has no axe-core violation of impact serious or critical
// (TestBrowserAccessibility): every form field is named, a <pre> that may
// scroll takes focus (tabindex 0), and the colours meet WCAG AA contrast.
//
// # Sign-in, sessions and scopes
//
// A user signs in with an API key, checked by the dispatcher's own
// Authenticator exactly as a bearer token on the API. The key is kept in
// a session cookie sealed with AES-GCM (unreadable and unforgeable without
// the secret; HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS or
// behind a proxy that says X-Forwarded-Proto: https) for Config.SessionTTL
// (12h), and checked again on every request: a key removed from the key
// file signs its sessions out at once. The secret comes from --ui-secret
// (file: or env:); without one each process makes its own, and a session
// holds on the replica that made it only — replicas behind one address
// need the same secret.
//
// # Sign-out
//
// Sign out ends every dashboard session of your key that started before
// it, in every browser, on every replica (revocations.go). It writes one
// record per API key to the revocations bucket (Streams.Revocations,
// bus.Config.RevocationsBucket; dispatchers only), keyed by an HMAC of the
// key under a key derived from the secret (never the key in clear), whose
// value is a not-before time (Unix ns). Each session cookie carries its
// issue time (session.Issued; a cookie without one counts as issued at
// 0), and a session of the key issued before the record's time is
// refused. A sign-out overwrites the key's record (history 1) with a TTL
// of SessionTTL + 5 minutes (revocationSkew, for clock skew), so the
// bucket is bounded by the number of keys, not by sign-ins; the bucket's
// age limit (bus.RevocationsMaxAge) is a backstop, and SessionTTL is at
// most MaxSessionTTL. The not-before time is never before the
// signing-out session's own issue time, so that session is ended whatever
// the replicas' clocks say. Without API keys (identity.OpenAccess) every
// sign-in is the one open identity and shares one record: a sign-out ends
// every open session started before it.
//
// Nothing is watched or cached: every request with a session reads its
// key's record from the bucket's leader (bus.KVGetFromLeader), so a
// sign-out holds on every replica from the moment it is written. A
// session is checked, in order:
//
//   - this replica signed its key out after it was issued: refused;
//   - the connection (Streams.Conn) is down: refused with 503 and
//     Retry-After, since a sign-out on another replica cannot be told
//     (fail closed; the pages need NATS anyway), served again once the
//     connection is back;
//   - the record is read: refused if the session was issued before its
//     time; a read that fails is refused with 503.
//
// A live stream checks its session the same way at every keep-alive
// (15 s) and ends once it is refused.
//
// The sign-out is recorded on this replica at once (in memory, one entry
// per key, kept SessionTTL + 5 minutes), then written to the bucket. It
// needs the session's CSRF token, but neither NATS nor a key the
// Authenticator still knows: the cookie is always cleared and this
// replica ends the key's sessions. When the write fails (NATS
// unreachable, the bucket full) the answer is a 503 page saying so: until
// they expire the key's earlier sessions may still work on another
// replica.
//
// What a key may do follows its scopes, as on the API:
//
//   - any key sees its own tenant's calls, dead letters, tools and usage
//     (read-only); with Config.AgentVisibility identity.VisibilityOwn
//     only the calls and dead letters its own agent made (the calls
//     page's agent filter is forced to it; a letter's agent is the one
//     the calls index has for its call, never the letter's own word),
//     unless it holds the admin or approve scope;
//   - the admin scope sees its own tenant, and may cancel calls (one or
//     in bulk), retry dead letters (one or in bulk) and purge them, of
//     it, and approve tool definitions;
//   - the installation scope (identity.InstallationScope) sees every
//     tenant;
//   - the approve scope sees the approval inbox (as ListApprovals: the
//     dispatcher shows it to approvers only) and may decide approvals
//     (the dispatcher checks the scope again, and records the approver).
//
// Whether a call or dead letter is shown is identity.Identity.MaySeeCall
// (viewer.MaySee), the rule the dispatcher applies on the API and the MCP
// endpoint: one outside answers as an id nobody minted does (404, the
// same text).
//
// A read-only key gets 403 on every action, with the scope it lacks named.
//
// # Actions
//
// Every action is a POST from the dashboard's own pages: the browser's
// Sec-Fetch-Site/Origin must be same-origin (http.CrossOriginProtection),
// and the form must carry the session's CSRF token (an HMAC of a nonce
// sealed in the session cookie). Forms are bounded (64 KiB) before they
// are parsed. Every action is logged with who took it, and recorded where
// the change is, naming who: a cancel's CANCEL_REQUESTED event carries the
// user's tenant/agent and "cancelled from the dashboard by …"; a dead
// letter's retry has "asked by … (dashboard)" in the new call's ACCEPTED
// event; approvals record their approver; a tool definition's approval
// is recorded in the registry with who approved it (registry.ApprovedBy).
//
// # Bulk actions: a dry run, then an exact confirmation
//
// Bulk cancel (bulkcancel.go) and dead-letter purge (purge.go) take two steps
// (bulk.go). The dry run selects with the page's filter, within what the
// viewer may see (the tenant and agent forced as on the pages), at most
// maxBulk items, the newest, and names them and their count (and how
// many more match). Its confirmation form carries the items, the count
// and a token: an HMAC, under the CSRF key, of the session's CSRF token,
// the action, the count and the items in order. The confirmation acts
// only when the count posted is the number of items posted and the token
// is the dry run's for exactly them (a count changed, an item taken out,
// added or repeated, another session's or another action's token: 400,
// nothing done); it never selects by the filter again, and checks each
// item again as the viewer (one the viewer may not see answers as an
// unknown id). Each item goes through the path a single action takes,
// recorded where the change is with who asked; the whole is logged with
// who, how many and the filter, and runs to its end when the browser
// goes away (bounded by bulkTimeout). A session runs one bulk action
// (cancel, purge or retry) at a time: the next confirmation while one
// runs is answered 429 and does nothing (bulkRuns, keyed by the
// session's CSRF token), so the actions running are bounded by the
// sessions signed in.
//
// Bulk cancel selects pending calls from the calls index with the calls
// page's filters (an outcome other than pending is refused) and a pool
// (the pool the dispatcher routes the call's tool to for its tenant,
// Core.PoolOf; the index does not know pools, so the dry run looks at
// the newest maxCancelScan pending calls the other filters select). Each
// is cancelled by Core.Cancel as the call's tenant, with the reason
// "cancelled from the dashboard by tenant/agent (bulk)" in its
// CANCEL_REQUESTED event; the page lists each outcome.
//
// A dead-letter purge selects letters with the dead-letter list's filter
// and purges each through dlq.Queue.Purge, which removes the letter from
// the DLQ only (dlq's "Purge": the call's record in the calls, events and
// results streams stays for the audit and replay) and records a
// DEAD_LETTER_PURGED event on the call naming "tenant/agent (dashboard)".
// The dashboard hands Purge the calls-stream sequence of the letter's
// call from the calls index (the call of the letter's tenant and tool)
// and the keyring results are believed with; a letter whose call the
// index does not hold, whose call is still pending (no result: the
// letter may be the only record of why it died), or that holds no
// decodable call, is kept (the dry run lists it apart, saying why, and
// Purge checks the calls and results streams again). The dry run lists
// the newest maxBulk letters that may be purged: kept letters do not
// take their places (at most maxBulk of them are listed apart). Only the
// letter's copy of the call's arguments is overwritten; the calls stream
// keeps the call's.
//
// Retry is offered for dead-lettered calls only (from their dead letter,
// the audited path `toolctl dlq retry` takes): re-running another failed
// call is its agent's decision, since its tool may have had side effects.
//
// # Sessions
//
// The sessions page (sessions.go) lists a page of the viewer's tenant's
// sessions (an installation viewer names a tenant) through the
// dispatcher's ListSessions with the viewer's identity, so that the
// dispatcher's rule applies: under VisibilityOwn a key without the admin
// or approve scope is refused (403). A session's page (/ui/session?id=,
// a query parameter, since a session id is any string) reads GetSession as
// the viewer (its log cut to the calls the viewer may see) and the
// session's newest calls from the calls index (refused ones among them),
// filtered as the calls page is (tenant; the viewer's agent under
// VisibilityOwn), and its pinned spec versions next to its mode. A
// call's page (a refused call's too: callSession) shows its session's
// state and mode, and the version the session pins for the call's tool,
// and links to it. It shows the call's delegation chain too
// (delegation.go): read through Core.GetDelegation as the viewer, so the
// calls listed are the ones the viewer's key may see, as the API answers
// them; a read that fails leaves the section out rather than the page.
//
// # The calls index
//
// The calls page reads a bounded in-memory index of the newest calls
// (internal/callindex; Config.IndexCalls, default 1,000,000), rebuilt from
// the calls and results streams when the dashboard starts and kept live by
// ordered consumers (callindex's package documentation has the design and
// the figures: memory per call, rebuild time, query times at 1M). Each
// replica keeps its own; the streams are the truth. One call's page finds the call in the index (its CALLS
// sequence) and reads the rest from the streams (audit.Source.One: the
// call, its events and its result), so a timeline is never cut to what
// the index keeps, and its outcome is the result's it shows even when the
// index has not read that result yet; a call older than the index's window is not found
// (toolctl audit reads any period). Its copy buttons (copyTexts and
// curlText, written by the script through navigator.clipboard) hold the
// call's request as JSON, a curl command that repeats it through the
// API's Call (Connect JSON; the body a CallRequest with the recorded
// argument bytes as arguments_json; the key the placeholder
// $TOOLWIRE_API_KEY and the server $TOOLWIRE_SERVER, toolctl's, never a
// key in the text), and the toolctl call line that repeats it (--session, --user,
// --run, then "--", the tool and its arguments; each word quoted for a
// POSIX shell when it needs it, by shellquote.Quote; no command when a word
// holds a control or format character, which a terminal could act on
// when pasted), both built from the audit record's redacted arguments:
// what the page shows, never a secret's value, and no idempotency key.
//
// A call parked for an approver is in no stream the index reads until it
// is approved: for a key with the approve scope its page (the inbox links
// to it) is its approval, read with GetApproval as the viewer (its own
// tenant): the state, tool, arguments as redacted for the approver, and a
// link back to the approval; any other key gets the unknown id's 404. A
// timeline is in the order its events were recorded at (their times;
// stream order puts a dispatcher's ACCEPTED, an unacknowledged publish,
// after a fast worker's STARTED). A PROGRESS event with partial output
// (tool.Partial) shows its number and the text of its text blocks,
// escaped, once (dispatch.PartialSeen drops a chunk stored again); the page shows what was stored when it was loaded, and reloads
// when the call ends (not chunk by chunk). An SVG image result is shown as an
// <img> of a data: URL (an image's SVG runs no script and loads nothing)
// with its source as escaped text, never inline. A filter or search
// longer than 256 bytes is refused (400, naming it), never cut.
//
// A tool's diff of two versions shows a changed description whole, as
// text, old and new side by side; diffs and JSON wrap, never cut off.
//
// Search covers the call's redacted arguments and its result text, cut
// to a bounded prefix per call; secret fields (the spec's secret marks)
// are never indexed, and arguments of a spec version the registry no
// longer has are not indexed at all (fail closed).
//
// # Refused calls
//
// A call admission refused is in no stream the pages read but the events
// stream: the calls index keeps the newest of them (their REJECTED events,
// Streams.Events; callindex's "Refused calls") and the calls page lists
// them among the admitted calls (callindex.Index.List: newest first, a
// cursor of two sequences, ?before= and ?rbefore=), with the outcome
// "rejected", their error type and reason; the outcome filter selects
// them. A refused call's page (refused.go) reads its REJECTED event by
// the sequence the index keeps (and checks it is that call's) and shows
// the caller, the tool, the policy decision (rule, version, reason) and
// the refusal's error; never arguments (the event has none). The tenant
// boundary is the calls': a refusal's tenant and agent are the caller's
// the dispatcher recorded, and viewer.MaySee decides. An overload refusal
// records nothing and is not shown.
//
// # Live updates
//
// The calls page and a running call's page listen on server-sent events
// (/ui/calls/live): each is one subscription to the index, capped, and
// ends when the client goes away or the dispatcher stops. The calls page's
// stream is batched (liveStream, liveBatch): the updates that match are
// collected, the newest version of each call, at most the page's limit of
// calls (older ones would leave the table anyway), and sent as one
// "calls" event every liveFlushEvery (250 ms) at most, rendered then; the
// page (static/app.js) applies what arrived once per animation frame and
// keeps at most its limit of rows. A call's page gets a "call" event when
// its call changes, and reloads.
//
// A pool is paused and resumed from its card (poolpause.go: POST
// /ui/pools/{pool}/pause with an optional reason, /resume), an
// installation admin's action (a pool serves every tenant), through
// Core.PausePool and Core.ResumePool (internal/dispatch doc.go, "Paused
// pools"). The card shows the pause as every replica reads it from the
// pool's consumer: paused, the record (who, when, why), and a pause or
// resume made outside toolwire as such (poolview.Pause.Drift).
//
// The approvals, dead-letter and pools pages have live regions: elements
// with data-refresh inside one with data-refresh-every (seconds); the
// script reads the page again at that interval (while it is shown) and
// updates each region from its new version: children with data-key are
// merged by key (data-refresh="keep": existing ones are left as they are,
// so a half-filled approval form survives), other regions replaced whole;
// a region holding the focus is left alone. Every live page has a pause
// control (data-live-toggle): paused, the calls stream is closed and the
// regions are not refreshed; resumed, the rows are read afresh and the
// stream opened again.
package dashboard
