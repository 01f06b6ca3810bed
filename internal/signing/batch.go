package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// HeaderBatch marks a signature over a batch of statements: the message's
// statement is one leaf of a Merkle tree whose root the signature covers,
// and the header carries the leaf's place and the path to the root,
//
//	<index>/<count> <base64 of the sibling hashes, leaf first>
//
// A message without it is signed alone: the signature covers its
// statement directly.
const HeaderBatch = "Toolwire-Batch"

// maxBatch bounds the statements one signature covers: the proof a
// message carries grows with log2 of it (8 hashes, 344 bytes, at 256).
const maxBatch = 256

// BatchStatement is what a batch's signature covers: the number of leaves
// and the root of the Merkle tree over them. Its form, for offline
// verifiers:
//
//	toolwire-batch-v1\n<count>\n<hex root>
//
// The tree: leaf = SHA-256(0x00 ‖ statement), node = SHA-256(0x01 ‖ left ‖
// right), neighbours paired left to right level by level, and a level's
// odd last node carried up unchanged. The prefixes keep a leaf from
// passing for a node and a batch statement from passing for a single one.
func BatchStatement(count int, root []byte) []byte {
	b := append([]byte("toolwire-batch-v1\n"), strconv.Itoa(count)...)
	b = append(b, '\n')
	return hex.AppendEncode(b, root)
}

type digest = [sha256.Size]byte

func leafHash(statement []byte) digest {
	var buf [256]byte
	return sha256.Sum256(append(append(buf[:0], 0), statement...))
}

func nodeHash(l, r digest) digest {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[1+sha256.Size:], r[:])
	return sha256.Sum256(b[:])
}

// merkle returns the root over leaves and each leaf's proof (its
// siblings' hashes, leaf level first).
func merkle(leaves []digest) (digest, [][]byte) {
	proofs := make([][]byte, len(leaves))
	at := make([]int, len(leaves)) // each leaf's ancestor's index in level
	for i := range at {
		at[i] = i
	}
	level := leaves
	for len(level) > 1 {
		for i, j := range at {
			if s := j ^ 1; s < len(level) {
				proofs[i] = append(proofs[i], level[s][:]...)
			}
			at[i] = j / 2
		}
		up := make([]digest, (len(level)+1)/2)
		for j := range up {
			if 2*j+1 < len(level) {
				up[j] = nodeHash(level[2*j], level[2*j+1])
			} else {
				up[j] = level[2*j]
			}
		}
		level = up
	}
	return level[0], proofs
}

// batchRoot is the root a message's batch header leads to from its
// statement, and the batch's size.
func batchRoot(header string, statement []byte) (digest, int, bool) {
	place, path, ok := strings.Cut(header, " ")
	i, n, ok2 := strings.Cut(place, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	proof, err3 := base64.StdEncoding.DecodeString(path)
	if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil || count < 2 || count > maxBatch ||
		index < 0 || index >= count || len(proof)%sha256.Size != 0 {
		return digest{}, 0, false
	}
	h := leafHash(statement)
	for w := count; w > 1; w = (w + 1) / 2 {
		if s := index ^ 1; s < w {
			if len(proof) == 0 {
				return digest{}, 0, false
			}
			sib := digest(proof[:sha256.Size])
			proof = proof[sha256.Size:]
			if index&1 == 0 {
				h = nodeHash(h, sib)
			} else {
				h = nodeHash(sib, h)
			}
		}
		index /= 2
	}
	return h, count, len(proof) == 0
}

// signedBytes is what h's signature must cover for a message whose
// statement is statement: the statement itself, or the statement of the
// batch it is a leaf of.
func signedBytes(h nats.Header, statement []byte) ([]byte, bool) {
	v := h.Values(HeaderBatch)
	if len(v) == 0 {
		return statement, true
	}
	root, count, ok := batchRoot(v[0], statement)
	if !ok || len(v) > 1 {
		return nil, false
	}
	return BatchStatement(count, root[:]), true
}

// batcher signs statements in groups, as a database commits. A statement
// that arrives while no signature is being made is signed alone, at once;
// those that arrive meanwhile wait and are signed together next, under
// one signature over their Merkle root. While signers are concurrent (a
// statement found a signature being made or a group gathering in the
// last Concurrent), a group waits until Gap after the last signature
// began, so that it grows — or until it is as large as the largest of the
// last recentGroups groups, whichever comes first. So a busy key makes at
// most one signature per Gap and its groups grow to what arrives within
// one, while a few concurrent signers (a caller with 4 calls in flight:
// the same 4 results come back again and again) are signed as soon as
// they are all there, not a Gap later. A statement waits at most about
// Gap more (up to twice that when more than maxBatch statements arrive
// within one Gap and it overflows to the next group). A key that has
// signed one statement at a time for Concurrent never waits; one
// goroutine signing statement after statement while others sign with
// the same key waits up to Gap for each (internal/delayed flushes its
// records concurrently for that reason). Under load one Ed25519
// signature (about 25 µs) covers every result finished in the last Gap,
// and a verifier that has checked it once checks the others with a few
// hashes. No goroutine of its own: the first member of a group signs it.
type batcher struct {
	mu   sync.Mutex
	busy bool      // a signature is being made
	open *group    // the statements gathering for the next signature
	last time.Time // when the last signature began
	// concurrent is when a statement last arrived while a signature was
	// being made or others gathered.
	concurrent time.Time
	// recent are the sizes of the last recentGroups groups signed (a
	// ring); a group as large as the largest of them is signed without
	// waiting out the Gap.
	recent [recentGroups]int
	next   int
}

// recentGroups is how many signed groups' sizes set the size at which a
// group is signed early.
const recentGroups = 16

// enough reports whether g, n statements, is as large as the largest of
// the recent groups: all the concurrent signers are likely in it. Every
// recentGroups-th group is a probe that is never signed early: it waits
// out the Gap and so measures what arrives within one. Without probes the
// early rule would keep the size where it started: under a steady stream
// from many signers a group reaches the recent largest before the Gap
// ends, is signed, and the largest never grows — groups of 6 where 12
// arrive within a Gap, twice the signatures to make and verify. A few
// signers in a closed loop lose at most a Gap on one group in
// recentGroups. Called with b.mu held.
func (b *batcher) enough(n int) bool {
	return b.next != 0 && n >= max(2, slices.Max(b.recent[:]))
}

// Gap is the least time between two signatures of a key whose signers
// are concurrent: at most 500 signatures a second, however many results.
// 2 ms, not 1: twice the statements per signature under load, and each
// signature costs its maker about 25 µs and each reader about 50 µs;
// in interleaved runs of toolwire-bench -path nats at 64 in flight it
// took 6-11 µs of CPU off each call (issue 27's cost goal), with no
// change to p50 latency there (the wait overlaps the work of the other
// calls in flight).
const Gap = 2 * time.Millisecond

// Concurrent is how long a key counts its signers as concurrent after
// the last sign of it: the statements of a burst arrive spread over a
// few milliseconds, not all while a signature is being made.
const Concurrent = 100 * time.Millisecond

type group struct {
	statements [][]byte
	wake       chan struct{} // the leader's: the signature before ended, or the group is full
	done       chan struct{} // closed: sig and proofs are set
	sig        string        // base64, as HeaderSignature carries it
	proofs     [][]byte
}

// signed is one statement's signature (base64) and, when it was signed in
// a batch, its HeaderBatch value.
type signed struct {
	sig   string
	batch string
}

func (k *Key) signStatement(statement []byte) signed {
	b := &k.batch
	for {
		b.mu.Lock()
		g := b.open
		if g == nil {
			g = &group{wake: make(chan struct{}, 1), done: make(chan struct{})}
			b.open = g
		}
		i := len(g.statements)
		if i == maxBatch {
			b.mu.Unlock()
			<-g.done
			continue
		}
		if i > 0 || b.busy {
			b.concurrent = time.Now()
		}
		g.statements = append(g.statements, statement)
		full := i == maxBatch-1 || (i > 0 && !b.busy && b.enough(i+1))
		b.mu.Unlock()
		switch {
		case i == 0:
			k.lead(g)
		case full:
			g.nudge()
			fallthrough
		default:
			<-g.done
		}
		return g.result(i)
	}
}

// lead is the first member's part: it waits until no signature is being
// made and, while signers are concurrent, until the last began Gap ago
// (or the group is full); then it signs the group and wakes the next
// one's leader.
func (k *Key) lead(g *group) {
	b := &k.batch
	for {
		b.mu.Lock()
		now, wait := time.Now(), time.Duration(0)
		if now.Sub(b.concurrent) < Concurrent {
			wait = Gap - now.Sub(b.last)
		}
		if n := len(g.statements); !b.busy && (wait <= 0 || n == maxBatch || b.enough(n)) {
			b.busy, b.open, b.last = true, nil, now
			b.recent[b.next] = n
			b.next = (b.next + 1) % recentGroups
			b.mu.Unlock()
			break
		}
		busy := b.busy
		b.mu.Unlock()
		if busy {
			<-g.wake
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-g.wake:
			t.Stop()
		}
	}
	defer b.finish() // also if signing panicked: later signers must not hang
	k.signGroup(g)
}

// finish ends the signature being made and wakes the next group's leader.
func (b *batcher) finish() {
	b.mu.Lock()
	b.busy = false
	next := b.open
	b.mu.Unlock()
	if next != nil {
		next.nudge()
	}
}

func (g *group) nudge() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (k *Key) signGroup(g *group) {
	defer close(g.done)
	if len(g.statements) == 1 {
		g.sig = base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, g.statements[0]))
		return
	}
	leaves := make([]digest, len(g.statements))
	for i, s := range g.statements {
		leaves[i] = leafHash(s)
	}
	root, proofs := merkle(leaves)
	g.sig = base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, BatchStatement(len(leaves), root[:])))
	g.proofs = proofs
}

func (g *group) result(i int) signed {
	if g.proofs == nil {
		return signed{sig: g.sig}
	}
	b := make([]byte, 0, 8+base64.StdEncoding.EncodedLen(len(g.proofs[i])))
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(len(g.statements)), 10)
	b = append(b, ' ')
	return signed{sig: g.sig, batch: string(base64.StdEncoding.AppendEncode(b, g.proofs[i]))}
}
