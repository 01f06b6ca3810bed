package limits

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// MaxConcurrency bounds a concurrency limit: the holders of a key are one
// value, rewritten by every Acquire and Release.
const MaxConcurrency = 1024

// holderBytes is one holder in a concurrency value: the first 16 bytes of
// the SHA-256 of its call id, and its lease's expiry in Unix nanoseconds.
const holderBytes = 16 + 8

// MinLease and MaxLease bound a lease.
const (
	MinLease = time.Second
	MaxLease = 24 * time.Hour
)

type holderID [16]byte

func holderOf(callID string) holderID {
	sum := sha256.Sum256([]byte(callID))
	return holderID(sum[:16])
}

func checkCall(callID string) error {
	if callID == "" || len(callID) > MaxInputBytes {
		return fmt.Errorf("%w: call id of %d bytes (1..%d)", ErrInvalid, len(callID), MaxInputBytes)
	}
	return nil
}

// Acquire takes one of the limit slots of key for callID until now+lease,
// or reports that all are held. Holders whose lease ended by now do not
// count (and are dropped). Acquiring again with a call id that holds a
// slot extends its lease and answers true: a retried Acquire takes no
// second slot. A refusal writes nothing.
//
// The holder renews the lease (Renew) while the call runs and any replica
// releases it (Release) at the terminal result. A holder that dies stops
// renewing: its slot is free for others at most lease after its last
// renewal.
//
// Errors: ErrInvalid (key, limit not in 1..MaxConcurrency, call id, lease
// not in MinLease..MaxLease), ErrContention, ErrCorrupt, ErrClosed, the
// context's and the server's.
func (s *Store) Acquire(ctx context.Context, key Key, limit int, callID string, lease time.Duration, now time.Time) (acquired bool, err error) {
	if limit < 1 || limit > MaxConcurrency {
		return false, fmt.Errorf("%w: concurrency limit %d not in 1..%d", ErrInvalid, limit, MaxConcurrency)
	}
	if err := checkLease(lease); err != nil {
		return false, err
	}
	if err := checkCall(callID); err != nil {
		return false, err
	}
	k, err := key.bucketKey(kindConcurrency)
	if err != nil {
		return false, err
	}
	t := &slotTxn{op: opAcquire, limit: limit, id: holderOf(callID), now: now.UnixNano(), until: now.Add(lease).UnixNano()}
	if err := s.do(ctx, k, newSlotsState, t); err != nil {
		return false, err
	}
	return t.ok, nil
}

// Renew extends the lease of callID's slot on key to now+lease; held is
// false when it holds none (released, or its lease ended and another call
// took the slot). A lease that ended while nobody took the slot is
// renewed: the slot was never given away.
func (s *Store) Renew(ctx context.Context, key Key, callID string, lease time.Duration, now time.Time) (held bool, err error) {
	if err := checkLease(lease); err != nil {
		return false, err
	}
	if err := checkCall(callID); err != nil {
		return false, err
	}
	k, err := key.bucketKey(kindConcurrency)
	if err != nil {
		return false, err
	}
	t := &slotTxn{op: opRenew, id: holderOf(callID), now: now.UnixNano(), until: now.Add(lease).UnixNano()}
	if err := s.do(ctx, k, newSlotsState, t); err != nil {
		return false, err
	}
	return t.ok, nil
}

// Release frees callID's slot on key. Any replica may release any call's
// slot; releasing a slot not held (already released, never acquired,
// expired and taken) is harmless and writes nothing. (The key's new TTL is
// reckoned from the local clock.)
func (s *Store) Release(ctx context.Context, key Key, callID string) error {
	if err := checkCall(callID); err != nil {
		return err
	}
	k, err := key.bucketKey(kindConcurrency)
	if err != nil {
		return err
	}
	return s.do(ctx, k, newSlotsState, &slotTxn{op: opRelease, id: holderOf(callID), now: time.Now().UnixNano()})
}

// InFlight returns how many slots of key are held at now (leases not
// ended). It reads a replica's copy: on a replicated bucket it may lag the
// leader by the replication delay.
func (s *Store) InFlight(ctx context.Context, key Key, now time.Time) (int, error) {
	k, err := key.bucketKey(kindConcurrency)
	if err != nil {
		return 0, err
	}
	var st slotsState
	if err := s.load(ctx, k, &st); err != nil {
		return 0, err
	}
	return st.live(now.UnixNano()), nil
}

func checkLease(lease time.Duration) error {
	if lease < MinLease || lease > MaxLease {
		return fmt.Errorf("%w: lease %s not in %s..%s", ErrInvalid, lease, MinLease, MaxLease)
	}
	return nil
}

type slotOp uint8

const (
	opAcquire slotOp = iota
	opRenew
	opRelease
)

type slotTxn struct {
	op         slotOp
	limit      int
	id         holderID
	now, until int64
	ok         bool
}

func (t *slotTxn) apply(s state) bool {
	st := s.(*slotsState)
	i := st.find(t.id)
	switch t.op {
	case opRelease:
		st.now = max(st.now, t.now)
		t.ok = i >= 0
		if i < 0 {
			return false
		}
		st.holders = slices.Delete(st.holders, i, i+1)
		return true
	case opRenew:
		st.now = max(st.now, t.now)
		t.ok = i >= 0
		if i < 0 {
			return false
		}
		st.holders[i].until = max(st.holders[i].until, t.until)
		return true
	}
	st.now = max(st.now, t.now)
	if i >= 0 {
		st.holders[i].until = max(st.holders[i].until, t.until)
		t.ok = true
		return true
	}
	st.holders = slices.DeleteFunc(st.holders, func(h holder) bool { return h.until <= t.now })
	if len(st.holders) >= t.limit {
		t.ok = false
		return false
	}
	st.holders = append(st.holders, holder{id: t.id, until: t.until})
	t.ok = true
	return true
}

type holder struct {
	id    holderID
	until int64
}

// slotsState is the value of a concurrency key: version 1, then per
// holder its id (16 bytes) and its lease's end (Unix nanoseconds,
// big-endian).
type slotsState struct {
	holders []holder
	now     int64 // latest request's clock
}

func newSlotsState() state { return &slotsState{} }

const slotsVersion = 1

func (st *slotsState) find(id holderID) int {
	for i := range st.holders {
		if st.holders[i].id == id {
			return i
		}
	}
	return -1
}

func (st *slotsState) live(now int64) int {
	n := 0
	for _, h := range st.holders {
		if h.until > now {
			n++
		}
	}
	return n
}

func (st *slotsState) reset(data []byte) error {
	st.holders, st.now = st.holders[:0], 0
	if data == nil {
		return nil
	}
	if len(data) < 1 || data[0] != slotsVersion || (len(data)-1)%holderBytes != 0 || (len(data)-1)/holderBytes > MaxConcurrency {
		return fmt.Errorf("concurrency value of %d bytes, version %d", len(data), versionOf(data))
	}
	for rest := data[1:]; len(rest) > 0; rest = rest[holderBytes:] {
		var h holder
		copy(h.id[:], rest[:16])
		h.until = int64(binary.BigEndian.Uint64(rest[16:holderBytes]))
		st.holders = append(st.holders, h)
	}
	return nil
}

func (st *slotsState) marshal(dst []byte) []byte {
	dst = append(dst, slotsVersion)
	for _, h := range st.holders {
		dst = append(dst, h.id[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(h.until))
	}
	return dst
}

// ttl: until the last lease ends. A key with no holder left lives the
// minimum TTL.
func (st *slotsState) ttl() time.Duration {
	var last int64
	for _, h := range st.holders {
		last = max(last, h.until)
	}
	if last == 0 {
		return 0
	}
	return time.Duration(last-st.now) + ttlSlack
}
