package signing

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/singleflight"
)

// Problem is why a message is not believed.
type Problem string

// Problems, as audit --verify names them.
const (
	// Unsigned: the message carries no signature.
	Unsigned Problem = "unsigned"
	// Forged: the signature does not verify over the message's statement
	// (altered bytes, another call's or another attempt's signature).
	Forged Problem = "forged"
	// WrongPool: the signer is not enrolled for the pool that serves the
	// call's tool (nor is it a dispatcher's key).
	WrongPool Problem = "wrong pool"
	// WrongCall: the payload names another call or tool than the one it
	// was stored for.
	WrongCall Problem = "wrong call"
	// WrongAttempt: another key holds the stored claim (the first
	// believed STARTED) of the result's attempt (internal/believed).
	WrongAttempt Problem = "wrong attempt"
)

// Error is a message refused: its problem, its signer (when it names
// one) and what was found.
type Error struct {
	Problem Problem
	Signer  string
	Detail  string
}

func (e *Error) Error() string {
	s := "signing: " + string(e.Problem)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Signer != "" {
		s += " (signer " + limit(e.Signer) + ")"
	}
	return s
}

// AsError returns err's *Error, or nil when err is another error (a
// lookup that failed: nothing is known).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Registry keys of enrolments: the registry bucket, which only the
// dispatchers write, holds who may sign. A key is enrolled for a pool
// (its workers' results and events of that pool's tools) or as a
// dispatcher's (anything: the dispatchers answer calls themselves).
const Prefix = "signers."

// PoolKey is the registry key enrolling pub for pool.
func PoolKey(pub, pool string) string { return Prefix + pub + ".pool." + pool }

// DispatcherKey is the registry key enrolling pub as a dispatcher's.
func DispatcherKey(pub string) string { return Prefix + pub + ".dispatcher" }

// SourcePrefix is the registry's prefix of a tool's source (registry.SourceKey),
// read here for the pool that serves a tool.
const SourcePrefix = "sources."

// Enrolment is the value of an enrolment key, for the record.
type Enrolment struct {
	Key        string    `json:"key"`
	Pool       string    `json:"pool,omitempty"`
	Dispatcher string    `json:"dispatcher,omitempty"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
}

// Verdict says who signed a message that is believed.
type Verdict struct {
	Signer     string
	Dispatcher bool
	Pool       string
}

// Keyring decides whether a signed message is believed: its signature
// verifies and its signer is enrolled for it. It reads enrolments and
// tool sources from the registry bucket by key (direct gets, which every
// role may make) and caches them: an enrolment for good (keys are not
// revoked while a process runs), a tool's pool for sourceTTL, a key
// found not enrolled for missTTL (so a flood of forgeries costs one
// lookup per key and second).
//
// A direct get is answered by any replica of a replicated bucket, also
// one that has not yet stored an enrolment the leader acknowledged: a
// worker enrolled a moment ago would look unenrolled there, and its
// genuine result like a forgery that a writer replaces. With
// ConfirmWith, a key or source found missing is read again from the
// bucket's leader before it is believed missing.
type Keyring struct {
	kv        jetstream.KeyValue
	leader    LeaderGet
	retry     Retry
	events    EventsReader
	listPools atomic.Bool

	mu      sync.Mutex
	known   map[string]time.Time // enrolment key → enrolled (zero) or not until
	sources map[string]source
	pools   map[string]poolKeys // with listPools
	claims  map[claimKey]Claim  // found by claim checks
	listing singleflight.Group  // pools being listed
	// verified remembers signatures that verified, with their signer and
	// the SHA-256 of the bytes each covers: one process checks a result
	// more than once (a dispatcher routes it to its caller and its overdue
	// sweeper follows it), the messages of a batch share one signature,
	// and an Ed25519 verification costs about 50 µs; a hit costs the
	// statement's hash, the batch path's and the batch statement's.
	// Bounded: cleared when full.
	verified map[string]verifiedSig // by signature
}

// verifiedSig is what a remembered signature was verified for: its
// signer and the SHA-256 of the bytes it covers. The signer is part of
// it: a signature verified for one signer proves nothing for a header
// naming another.
type verifiedSig struct {
	signer string
	sum    [sha256.Size]byte
}

type source struct {
	pool  string
	until time.Time
}

const (
	missTTL    = time.Second
	sourceTTL  = 10 * time.Second
	maxEntries = 1 << 14
)

// NewKeyring reads enrolments from kv (the registry bucket).
func NewKeyring(kv jetstream.KeyValue) *Keyring {
	return &Keyring{kv: kv, known: map[string]time.Time{}, sources: map[string]source{}, pools: map[string]poolKeys{}, claims: map[claimKey]Claim{}, verified: map[string]verifiedSig{}}
}

// LeaderGet reads key of the registry bucket from its stream's leader
// (bus.KVGetFromLeader): the value, or an error wrapping
// jetstream.ErrKeyNotFound when the key is absent or deleted there.
type LeaderGet func(ctx context.Context, key string) ([]byte, error)

// ConfirmWith makes k read a key found missing again through get before
// it believes it missing (see Keyring). Call it before k is used.
func (k *Keyring) ConfirmWith(get LeaderGet) { k.leader = get }

// Retry runs read until it succeeds, fails for a reason other than the
// bucket's replicas being unable to answer now, or ctx ends
// (bus.LeaderRetry), and returns the last attempt's error.
type Retry func(ctx context.Context, read func(context.Context) error) error

// RetryWith makes k make a direct get that found no replica to answer
// (an election under way, the process's server just lost) again through
// retry, within the caller's context, instead of failing the check at
// once. Call it before k is used.
func (k *Keyring) RetryWith(retry Retry) { k.retry = retry }

// get reads key by a direct get and, when that finds it missing and k
// confirms, from the leader; found is false for a key that is missing.
func (k *Keyring) get(ctx context.Context, key string) (value []byte, found bool, err error) {
	var e jetstream.KeyValueEntry
	if k.retry == nil {
		e, err = k.kv.Get(ctx, key)
	} else {
		err = k.retry(ctx, func(ctx context.Context) error {
			var err error
			e, err = k.kv.Get(ctx, key)
			return err
		})
	}
	if err == nil {
		return e.Value(), true, nil
	}
	if !missing(err) {
		return nil, false, err
	}
	if k.leader == nil {
		return nil, false, nil
	}
	v, err := k.leader(ctx, key)
	if missing(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("from the leader: %w", err)
	}
	return v, true, nil
}

func missing(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) || errors.Is(err, jetstream.ErrInvalidKey)
}

// Check decides whether a message of kind about callID's attempt with
// payload and headers h is believed as written for a call of tool: the
// call's tool as the caller knows it from what only dispatchers write,
// never from the message. With tool "" only a dispatcher's key is
// believed. It returns an *Error for a message that is not, and another
// error when a lookup failed (then nothing is decided: the caller tries
// again).
func (k *Keyring) Check(ctx context.Context, h nats.Header, kind, callID string, attempt int32, payload []byte, tool string) (Verdict, error) {
	signer, p := k.verify(h, Statement(kind, callID, attempt, payload))
	if p != "" {
		return Verdict{}, &Error{Problem: p, Signer: signer}
	}
	ok, err := k.enrolled(ctx, DispatcherKey(signer))
	if err != nil || ok {
		return Verdict{Signer: signer, Dispatcher: ok}, err
	}
	if tool == "" {
		return Verdict{}, &Error{Problem: WrongPool, Signer: signer, Detail: "not a dispatcher's key, and the call's tool is not known to the reader"}
	}
	pool, err := k.poolOf(ctx, tool)
	if err != nil {
		return Verdict{}, err
	}
	if pool == "" {
		return Verdict{}, &Error{Problem: WrongPool, Signer: signer, Detail: fmt.Sprintf("no pool serves tool %q", limit(tool))}
	}
	if ok, err = k.enrolled(ctx, PoolKey(signer, pool)); err != nil || !ok {
		if err == nil {
			err = &Error{Problem: WrongPool, Signer: signer, Detail: fmt.Sprintf("not enrolled for pool %q, which serves tool %q", pool, limit(tool))}
		}
		return Verdict{}, err
	}
	return Verdict{Signer: signer, Pool: pool}, nil
}

// verify is VerifyStatement, remembering the signatures that verified:
// the messages of one batch share theirs, so it is verified once for all.
func (k *Keyring) verify(h nats.Header, statement []byte) (string, Problem) {
	c, p := claimOf(h, statement)
	if p != "" {
		return c.signer, p
	}
	signer, sig, signed := c.signer, c.sig, c.signed
	want := verifiedSig{signer: signer, sum: sha256.Sum256(signed)}
	k.mu.Lock()
	seen, ok := k.verified[sig]
	k.mu.Unlock()
	if ok && seen == want {
		return signer, ""
	}
	if p := verifySigned(signer, sig, signed); p != "" {
		return signer, p
	}
	k.mu.Lock()
	if len(k.verified) >= maxVerified {
		clear(k.verified)
	}
	k.verified[sig] = want
	k.mu.Unlock()
	return signer, ""
}

// maxVerified bounds Keyring's memory of verified signatures.
const maxVerified = 1 << 14

// Learn records an enrolment this process wrote or read elsewhere.
func (k *Keyring) Learn(key string) {
	k.mu.Lock()
	k.known[key] = time.Time{}
	k.mu.Unlock()
}

func (k *Keyring) enrolled(ctx context.Context, key string) (bool, error) {
	now := time.Now()
	k.mu.Lock()
	until, seen := k.known[key]
	k.mu.Unlock()
	if seen && (until.IsZero() || now.Before(until)) {
		return until.IsZero(), nil
	}
	_, ok, err := k.get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("signing: enrolment lookup: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.known) >= maxEntries {
		for key, until := range k.known {
			if !until.IsZero() {
				delete(k.known, key)
			}
		}
	}
	if ok {
		k.known[key] = time.Time{}
	} else {
		k.known[key] = now.Add(missTTL)
	}
	return ok, nil
}

func (k *Keyring) poolOf(ctx context.Context, tool string) (string, error) {
	if tool == "" {
		return "", nil
	}
	now := time.Now()
	k.mu.Lock()
	s, ok := k.sources[tool]
	k.mu.Unlock()
	if ok && now.Before(s.until) {
		return s.pool, nil
	}
	v, found, err := k.get(ctx, SourcePrefix+tool)
	if err != nil {
		return "", fmt.Errorf("signing: source of %q: %w", limit(tool), err)
	}
	var src struct {
		Pool string `json:"pool"`
	}
	if !found || json.Unmarshal(v, &src) != nil {
		return "", nil
	}
	k.mu.Lock()
	if len(k.sources) >= maxEntries {
		clear(k.sources)
	}
	k.sources[tool] = source{pool: src.Pool, until: now.Add(sourceTTL)}
	k.mu.Unlock()
	return src.Pool, nil
}
