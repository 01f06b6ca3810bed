// Package archive keeps the record past the live streams' window: it
// seals the calls, results and events streams' messages of each closed
// period as signed, hash-chained segments in an archive store, reads them
// back, and verifies the chain (DESIGN §14, "The record lasts").
//
// # Store
//
// OpenBucket opens the store through gocloud.dev/blob: a directory by
// default (made when missing), or a URL — s3://bucket?region=…
// (endpoint=…&use_path_style=true for an S3-compatible server),
// gs://bucket (Google Cloud Storage), azblob://container (Azure Blob
// Storage), file://, mem:// for tests. Credentials come from the
// environment as each driver documents, never from the URL: the AWS
// SDK's chain for s3://; Application Default Credentials for gs://
// (STORAGE_EMULATOR_HOST names an emulator, then no credentials are
// sent), and without them opening fails with an error saying so; for
// azblob:// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, or
// AZURE_STORAGE_SAS_TOKEN, or AZURE_STORAGE_CONNECTION_STRING, else
// azidentity's default credential, and the service from the
// AZURE_STORAGE_* variables and the URL's domain, protocol,
// storage_account, localemu and cdn (cdn=true: a CDN in front of the
// service, which then names no account). With a connection string the
// service is the connection string's: the URL's domain and protocol
// parameters (and AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL) are
// ignored. gs:// is opened here (openGCS), not through the opener
// gcsblob registers, which prints a warning on standard output when it
// finds no credentials (toolctl audit writes JSON there), goes on
// without them, and reads the credentials and STORAGE_EMULATOR_HOST
// once a process; here they are read at each open. azblob:// is opened
// here too (openAzure), not
// through gocloud.dev's URL opener, which reads the variables once a
// process: with its own HTTP transport, whose errors quote no request's
// query (with a SAS token the query is the credential, and net/http
// quotes a failed request's URL), and with a SAS token an azblob:// URL
// may not name the service (the token would go wherever it pointed).
// Every object is written with Bucket.Upload, never NewWriter or
// WriteAll: gocloud.dev's azureblob (v0.47.0) Writer.Close dereferences a
// nil pipe when the upload fails while it waits — a create-if-absent
// that loses a race does — and would panic (upload.go).
// The store holds what the streams hold, unredacted secret arguments
// included: protect it as the JetStream store is protected (a directory
// store makes its directories 0700 and its files 0600, and the archiver
// warns at start when an existing directory is open to others; a file://
// URL leaves the modes to the umask). Query and user info of a store URL
// never reach an error or a log.
//
// Every dispatcher replica must name the same store, and it must create
// an object only if none has its key, atomically across processes: S3
// (conditional writes, If-None-Match), GCS (ifGenerationMatch=0) and
// Azure (If-None-Match: *) do. One conformance suite checks what the
// archive needs of a store with each driver's real client against a
// server on loopback: gofakes3 (S3), fake-gcs-server (GCS), Azurite
// (Azure, installed by make azurite). A directory suits a single
// replica, and tests: its create-if-absent (gocloud.dev fileblob) is a
// check then a rename, not atomic across processes, and a directory
// local to each replica would hold a chain per replica. The archiver says
// so at start for a directory, and warns when it sees another replica
// holding the lease while its store is a directory.
//
// # Segments
//
// A stream's chain lives under its name (TOOLWIRE_CALLS/, …):
//
//	<stream>/<index>-<nonce>.jsonl.gz   the records (Message, one a JSON line, gzip)
//	<stream>/<index>.manifest.json      the signed manifest (SignedManifest)
//	<stream>/head.json                  the chain's head (Head)
//
// with index zero-padded to 16 digits, from 0. A record is a stored
// message as it is in the stream — subject, stream sequence, stored time,
// headers and payload bytes — not the audit export's Record (a call joined
// with its result, arguments redacted, the payload reduced to a
// SHA-256): the archive must let a replay re-execute a call as it was and
// let internal/believed check a result's signature over its exact bytes,
// and the audit export is derived from these messages later. What it
// shares with the export (toolwire-audit-export/v1, internal/audit) is its
// shape: JSON lines plus a manifest that names its format
// (SegmentFormat), counts what it holds, gives the sequences it covers
// and the SHA-256 of the records object as stored.
//
// A Manifest gives the stream, its Index, the sequences covered (FromSeq
// to ToSeq, contiguous along the chain) and those of the first and last
// messages held, their stored times, the period, the counts (messages,
// sequences missing because deleted, and DroppedBeforeArchive: lost), the
// records' key, size and SHA-256, and Prev: the SHA-256 of the previous
// segment's manifest object. The manifest is signed by the dispatcher's
// key (bus.Bus.Signer, internal/signing) over
// signing.Statement(KindSegment, "<stream>/<index>", 0, manifest bytes),
// so a third party checks it with the public key alone, as it checks a
// result's signature. A Writer writes the records first, then the
// manifest only if no object has its key (IfNotExist: two archivers can
// never both extend a chain; the loser gets ErrRaced), then the head.
// A records object with no manifest (a writer stopped between the two)
// is never referenced and is harmless. A read the store refuses is an
// error, never a missing object: gcsblob maps Cloud Storage's 403 to
// NotFound, and a writer that took an unreadable head for none would
// lose every race (ErrRaced); OpenWriter fails saying permission denied,
// and Verify reports the error, not a missing object.
//
// Verify walks a chain from its first segment: each manifest's signature
// (and, with VerifyOptions.Trusted, its signer), its link to the one
// before, its range following the previous one, its records object's
// SHA-256, size, count, sequences and times, that each manifest names
// the stream (a chain copied under another stream's name does not
// verify), and that the chain reaches the head, which must name the
// stream and a segment of the chain as it is (its manifest's SHA-256 and
// ToSeq; a head behind the chain's end is a writer stopped between the
// two, and sound). A removed segment is a "gap", a removed last segment a
// "head" problem, an edited one "changed". Removing the head with the
// last segments is found only against the progress recorded in
// JetStream (Progress.ToSeq).
//
// # Reading
//
// Reader lists a stream's segments (Segments: listed once, then only
// the manifests of the next indexes are looked for, a request when none
// is new; listed again every RelistEvery, a minute), iterates its archived
// messages by sequence, stored time and subject (Each with a Query; only
// overlapping segments are read), and finds a call's result
// (FindResult: the call id is a ULID, so only segments stored since the
// call's time are read). It does not check signatures: Verify does, and a
// result read is checked by internal/believed as a live one is. toolctl
// audit and replay are to read archive and live streams through it; the
// dispatcher reads a call's result and the call past the window through
// it (internal/believed ReadArchived, internal/dispatch archived.go), and
// refuses new calls while a stream's oldest unarchived message is within
// HoldAhead/4 of the stream's live MaxAge, so that JetStream would drop
// it soon: a hold no archiver renews, or none (internal/dispatch
// archivelag.go).
//
// # The archiver
//
// Archiver is a dispatcher service (startstop.Service; internal/dispatch
// starts it when the dispatcher has an archive store). Every replica runs
// one; one is active: it holds a lease, the key "leader" of the KV bucket
// <prefix>_archive (Bucket), taken when free or expired and renewed by
// compare-and-set on its revision by a goroutine of the archiver's own,
// every quarter of LeaseTTL (30s) and at most every Config.Every (30s),
// so a segment that takes long to read or upload keeps it; it is counted
// on for three quarters of LeaseTTL after a renewal, so a renewal that
// fails stops the work (a segment being filled is dropped, never sealed)
// before another replica may take over; Stop ends the renewals and gives
// it up. A replica that did not hold the lease without a break since its
// last pass forgets its chains' heads and reads them again from the
// store.
//
// Each pass, for each of the calls, results and events streams in turn,
// it seals the next segment while the period (Config.Segment, 1h, aligned
// to the epoch) of the oldest unarchived message has closed (ended
// Settle, 1m, ago: every message stored in it is readable by then): the
// messages from there to the end of that period, read with a bus.Scan (no
// consumer is left behind), at most MaxSegmentMessages or MaxSegmentBytes
// a segment — for at most Every a stream a pass (the next pass goes on),
// so that every stream is held every pass however far behind one is.
// Then it holds the stream (below) — also when sealing failed: an
// archive store that is down is when a hold is needed most, and the
// archiver then counts as archived what the chain's head last known says
// (its writer's, the progress recorded in the bucket, or none: every
// message) — and records the stream's Progress — the last sequence
// archived, the chain's length, the time of the oldest unarchived
// message — in the bucket (key progress.<stream>; ReadProgress), where
// any replica reads the archive's lag. Messages the stream dropped before
// they were archived are counted in the segment that follows
// (DroppedBeforeArchive) and logged at error.
//
// # How JetStream drops only what is archived
//
// The calls and results streams deny purges (DenyPurge), and a server
// never lets that be undone on an existing stream, so the archiver cannot
// purge what it has archived. JetStream drops by age instead: with an
// archive the streams' MaxAge is the window (bus.Config.RetentionWindow,
// dispatchd --retention-window, 168h; events min(72h, window)), and the
// archiver holds it over what is not archived.
//
//   - Turning the archive on, or shortening the window, drops nothing at
//     once: with an archive, a dispatcher that ensures the layout never
//     lowers a live archived stream's MaxAge (bus, "Settings that differ
//     from the live server"). The archiver lowers it to the window once
//     every message older than the window is archived, and never while
//     it is behind.
//   - When the oldest unarchived message comes within HoldAhead/2 of the
//     window (HoldAhead: 6h, or a quarter of the shortest window when
//     less; 3h before the window by default), the stream's MaxAge is
//     raised to that message's age plus HoldAhead (never below what it
//     is) and marked with bus.ArchiveHoldMetadata, the time HoldAhead
//     from now, renewed every pass while the hold is needed; an expired
//     mark counts as none. Once the archive is past the window again the
//     MaxAge is the window and the mark goes. A dispatcher started
//     without an archive keeps a raised MaxAge while its mark stands.
//
// Normally the archive lags by about Segment + Settle + Every (about an
// hour) against a window of days, so no hold is ever needed; dispatchd
// refuses a window under 4 × Segment (4h), and Start warns when HoldAhead
// is above half a window (the stream would be held for good). A hold
// covers an archive store that is down or an archiver that cannot keep
// up, for as long as an archiver runs: JetStream applies the raised
// MaxAge whatever the mark says, so with no archiver for HoldAhead the
// oldest unarchived messages may go.
//
// Age is not the only limit. The calls stream is discard-new: full, it
// refuses new calls (OVERLOADED) and drops nothing. The results and
// events streams are discard-old: full, they drop their oldest messages,
// archived or not. Size their byte limits (dispatchd --stream-max-bytes
// results=…,events=…) for the window and the outage to ride out:
//
//	MaxBytes ≥ peak bytes stored per second × (window + HoldAhead + longest archive outage)
//
// (a stream held over an outage keeps growing past its window). A
// segment that records messages dropped before they were archived
// (DroppedBeforeArchive, logged at error, a "dropped" problem in Verify)
// says the limit was too small.
//
// Full outputs over the inline limit live in the blob object store and
// are not archived: an archived result keeps its reference, which
// resolves while the blob store keeps the blob (bus.Config.ResultsMaxAge,
// 720h, independent of the window). The window changes no other store:
// sessions, retries, dead letters and approval records keep their ages;
// only the idempotency keys follow it (bus, "Limits").
//
// Without an archive store nothing of this runs: the streams keep their
// MaxAge (720h by default) as before.
package archive
