// Package replay re-executes recorded calls for an audit or a rollout
// check (toolctl replay) and diffs the responses.
//
// A replay is a new call (new call id) with the original's tool, exact
// arguments and caller, pinned to the tool's current version or a named
// one, published on the shadow subject of the tool
// (<prefix>.shadow.<type>.<tenant>.<provider>.<tool>) in the calls stream.
// Only shadow pools consume shadow subjects: workers started with
// --shadow (worker.Config.Shadow), which publish their specs as registry
// versions without moving the current version, keep their own durable
// consumers, and retry only in-process, so a replay never reaches a live
// pool. Its result is written under the routing name "replay", where no
// dispatcher listens; the original call's result, events and audit
// record are untouched, and audits (which read the call subjects) do not
// count replays. The replay's answer is the result the results stream
// stored, read from its leader: a core message on the result subject is
// only a hint to look (a JetStream publish reaches core subscribers even
// when the stream does not store it), and the replay also looks every
// second, so a hint lost in a reconnect costs at most that.
//
// Diff compares what a caller sees: ok, the error's type and message, the
// content blocks, the structured output and the intents, by value, naming
// the path of each change. Meta (worker, timings) is not compared.
//
// New attaches to the installation read only, through bus.OpenView (the
// view audit and dlq share): the calls and results streams and the
// registry, looked up once.
//
// Replays take their calls from audit records (audit.Source.Run): with an
// archive store (audit.Source.UseArchive, toolctl replay --archive) a call
// older than the calls stream's window is read from the archive, its
// original result too, and replayed exactly as a live one; the replay
// itself is a new call in the live streams.
//
// A replay runs the tool again: a tool with side effects has them again,
// on whatever the shadow pool's configuration points at. Point shadow
// workers at staging backends.
package replay
