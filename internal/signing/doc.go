// Package signing is who wrote what in the record. Every process that
// writes a call's result or events signs them with an Ed25519 key of its
// own (Key; bus.Bus.Signer): a worker with its key, a dispatcher with its
// key. A signature covers a Statement — the kind of message, the call id,
// the attempt and the SHA-256 of the exact payload bytes — and travels in
// the message's headers (HeaderSigner, HeaderSignature), so the stored
// bytes are what is checked and nothing is re-encoded.
//
// Whose signature is believed is the registry bucket's to say, which only
// the dispatchers write: an enrolment key per signing key and pool
// (PoolKey), or per dispatcher key (DispatcherKey). Keyring.Check believes
// a message whose signature verifies and whose signer is a dispatcher's or
// is enrolled for the pool that serves the tool the message names
// (the registry's sources); internal/believed applies it to results.
// Besides results and events, a worker signs its registry announcements
// (KindAnnouncement) and a dispatcher its notices to the other MCP
// replicas (KindMCPCancel), which only a dispatcher's key passes.
//
// # Enrolment
//
// A dispatcher enrols its own key when it starts. A worker's key is
// enrolled when the worker announces its tools (internal/registry): the
// announcement names the key, and the dispatcher that handles it enrols
// it for the announcing pool only if its Trust allows it — a directory
// of keys an operator put there, one file per pool (--worker-keys), and,
// with the embedded server, the local worker key under the data
// directory (LocalWorkerKey, trusted for every pool: only the
// installation's owner can write there). A dispatcher's in-process
// workers sign with its key. The enrolment is recorded with who enrolled
// it and when (Enrolment).
//
// # Batches
//
// Under load one signature covers many statements. A key signs a
// statement alone and at once when no signature is being made; the
// statements that arrive meanwhile are signed together next, and while
// its signers are concurrent a key makes at most one signature per Gap
// (1 ms), so that a group gathers — but signs a group early once it is as
// large as the largest of the last 16 groups (a caller with a few calls
// in flight gets their results signed as soon as they are all there, not
// a Gap later), except every 16th group, a probe that waits out the Gap
// so that the size signed early can grow with the load (without it a
// steady stream kept groups at whatever size they first had). A batch's
// signature covers its
// BatchStatement (the number of leaves and the root of a Merkle tree over
// the statements' hashes), and each message carries its place and path
// to the root in HeaderBatch: every message is still checked alone, by a
// third party too, and a verifier that has checked the batch's signature
// once (Keyring remembers it) checks the next message of the batch with a
// few hashes instead of an Ed25519 verification.
//
// # Decisions
//
//   - Batches, not a MAC on the hot path: a per-pool MAC key would be one
//     more secret for every dispatcher to hold and a third party could not
//     check it; a batch's signature is public-key evidence like a single
//     one. What it costs: a statement signed while signers are concurrent
//     waits up to Gap (2 ms) for its group, and its message carries up to
//     8 hashes more (344 bytes at the largest batch, 256 statements). A
//     key signing one statement at a time (no statement found another
//     being signed in the last 100 ms) never waits; a goroutine that signs
//     many statements one after another while others sign with the same
//     key waits about Gap for each, so such loops sign concurrently
//     (internal/delayed).
//   - What a batch shows: a message carries the hashes of the other
//     statements signed with it (other calls', possibly other tenants'),
//     so it links calls one key signed within the same Gap, and a
//     holder of it could confirm a guess of another statement (call id,
//     attempt and payload bytes). Call ids carry 80 random bits, so the
//     guess is not practical; the link is what a reader of the results
//     stream sees anyway (signer and time).
//   - Ed25519 through nkeys' encoding: public keys read "U…", seeds
//     "SU…", as NATS users' do; a PEM PKCS #8 Ed25519 key (Helm's
//     genPrivateKey "ed25519") is read too. A third party checks a
//     signature with the public key alone (VerifySignature,
//     VerifyStatement): what an audit export carries.
//   - Identity per pool, not per call: a key enrolled for a pool may
//     answer that pool's calls, so a worker of the sandbox pool taken over
//     cannot answer the http pool's calls or any other pool's, and a worker
//     credential alone (shared by every pool) answers none. Splitting a
//     pool's replicas into keys of their own is possible (one file per key
//     and pool): a key then cannot answer an attempt another key claimed
//     (internal/believed refuses it as WrongAttempt), and the record says
//     which replica claimed and answered what; it cannot stop a replica
//     taken over from claiming calls of its pool first, which its pool
//     credential lets it pull anyway.
//   - Keys are not revoked while a process runs: an enrolment, once seen,
//     is cached for good (a lookup per key, not per message). To revoke a
//     key, delete its enrolment keys from the registry bucket (a
//     dispatcher's credential) and restart the dispatchers; results it
//     signed before stay believed.
//   - A key not found enrolled is looked up again after a second at the
//     earliest, so that a flood of forgeries costs one registry read per
//     key and second, not one per message; a tool's pool is cached 10 s.
//     A key or source that a direct get finds missing is read again from
//     the registry stream's leader (Keyring.ConfirmWith; every bus.Bus
//     does) before it is believed missing: a replica that lags the leader
//     must not make a genuine result look forged to a writer, which would
//     then store a second answer after it.
//   - A direct get that no replica answers (an election under way, the
//     process's server just lost) is made again within the caller's
//     context (Keyring.RetryWith; bus.NewKeyring does): a lookup that
//     could not be made decides nothing, and failing it at once failed
//     a GetResult asked during an election.
//   - What permissions cannot express (a worker credential may publish on
//     every result and event subject, per call id) the signatures decide:
//     what a worker credential publishes without an enrolled key is
//     stored but never believed.
package signing
