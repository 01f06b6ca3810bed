// Package sessionview is admission's view of the sessions: whether a
// session exists (was ever written: opened), whether it has ended
// (END_SESSION), its mode (SET_MODE) and the spec versions it pins
// (Session.pinned_versions, State.Pins), as the
// reference intent applier (internal/intents) keeps them in the sessions
// bucket. The dispatcher (internal/dispatch, admit_session.go) asks it
// for the session of every call that names one, before the policy; this
// package does not know admission.
//
// # Consistency across replicas
//
// Every dispatcher replica runs a View: a cache of session states and a
// KV watch of the sessions bucket (a startstop.Service, started and
// stopped with the dispatcher). The watch delivers updates only — never
// the whole bucket — and every update replaces the cached state of its
// session (or adds it). A session the cache does not hold is read from
// the bucket (View.State) and then cached. Since the watch is in place
// before Start returns, every write after that reaches the cache; every
// write before it is in the bucket a miss reads. A read and the watch can
// race: the entry with the later bucket revision wins, so a stale read
// never overwrites a newer update. So a session ended on any replica, or
// by any orchestrator writing the bucket, is seen ended here within the
// watch's delivery (one stream message, milliseconds); a replica that
// wrote a session itself (View.Refresh after the write) sees it at once.
// A stopped View caches nothing and reads the bucket every time.
// A watch that ends without Stop (its subscription closed under it) is
// noticed: the cache, which nothing would keep current, is emptied and
// nothing is cached until a new watch is in place; meanwhile State reads
// the bucket for every call and starts a new watch, at most one attempt
// every 5s (a WARN log says so).
//
// Stop ends the watch also on a connection already closed (a killed
// dispatcher's): the watch has a context of its own, which Stop cancels
// — nats.go ends the watch's subscription goroutine only with it when an
// unsubscribe cannot reach the server.
//
// # Bounded memory
//
// The cache holds at most Config.MaxSessions entries (default 65536), each
// a bucket key, a few flags, the mode and the end reason cut to
// MaxReasonBytes (256): a few MiB at most; and at most Config.MaxPins
// pinned versions over all entries (default 262144, some 30 MiB; a
// session's own pins are at most intents.MaxPins, 256, more in a record
// written otherwise are cut). Past either bound random entries are
// dropped (Go's map order) until the new one fits; a dropped session is
// read again when next asked for, so eviction costs a read, never
// correctness. A session never written is cached too (State.Exists
// false: a read that found no key, revision 0), so a caller naming fresh
// sessions costs one bucket read each and at most one cache entry each,
// within the same bound; a write to it, seen by the watch, replaces the
// entry. A deleted or purged session is cached as never written (not
// Exists, active, no mode), at the revision of the deletion: under a
// policy's sessions.opened_only (internal/policy) its calls are refused as
// those of a session never opened.
package sessionview
