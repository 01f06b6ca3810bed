package limits

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// Repeat counts the loop guard's run on scope: how many times in a row
// fingerprint has been called in scope, this call included. A run goes on
// while each call has the same fingerprint as the one before it in scope
// and comes at most window after it; a different fingerprint, or a pause
// longer than window, starts a new run at 1. Every call writes.
//
// scope names the session (or run) the guard watches: Key{Tenant, Limit:
// the loop guard's id, Value: the session id}. fingerprint is the hex
// SHA-256 of the tool and its canonical arguments, computed by the
// caller (so key order and number forms must be canonical before). With
// the default thresholds, a count of 3 warns, 5 asks and 10 denies.
//
// "In a row" is in the order the bucket stores the session's calls: two
// calls of one session in flight at once are ordered by the server.
//
// Errors: ErrInvalid (key, fingerprint not 64 hex digits, window not in
// 1s..366d), ErrContention, ErrCorrupt, ErrClosed, the context's and the
// server's.
func (s *Store) Repeat(ctx context.Context, scope Key, fingerprint string, window time.Duration, now time.Time) (count int, err error) {
	var fp [32]byte
	if len(fingerprint) != 64 {
		return 0, fmt.Errorf("%w: fingerprint of %d characters, want 64 hex digits", ErrInvalid, len(fingerprint))
	}
	if _, err := hex.Decode(fp[:], []byte(fingerprint)); err != nil {
		return 0, fmt.Errorf("%w: fingerprint is not hex", ErrInvalid)
	}
	if window < time.Second || window > maxHorizon {
		return 0, fmt.Errorf("%w: loop window %s not in 1s..366d", ErrInvalid, window)
	}
	k, err := scope.bucketKey(kindLoop)
	if err != nil {
		return 0, err
	}
	t := &repeatTxn{fp: fp, now: now.UnixNano(), window: int64(window)}
	if err := s.do(ctx, k, newLoopState, t); err != nil {
		return 0, err
	}
	return int(t.count), nil
}

type repeatTxn struct {
	fp          [32]byte
	now, window int64
	count       uint32
}

func (t *repeatTxn) apply(s state) bool {
	st := s.(*loopState)
	if st.count > 0 && st.fp == t.fp && t.now-st.last <= t.window {
		if st.count < math.MaxUint32 {
			st.count++
		}
	} else {
		st.fp, st.count = t.fp, 1
	}
	st.last = max(st.last, t.now)
	st.window = t.window
	t.count = st.count
	return true
}

// loopState is the value of a loop-guard key: version 1, the run's
// fingerprint (32 bytes), its count (big-endian uint32), and the time of
// its last call (Unix nanoseconds, big-endian): 45 bytes.
type loopState struct {
	fp     [32]byte
	count  uint32
	last   int64
	window int64 // the latest request's window
}

func newLoopState() state { return &loopState{} }

const loopVersion = 1

func (st *loopState) reset(data []byte) error {
	*st = loopState{}
	if data == nil {
		return nil
	}
	if len(data) != 45 || data[0] != loopVersion {
		return fmt.Errorf("loop value of %d bytes, version %d", len(data), versionOf(data))
	}
	copy(st.fp[:], data[1:33])
	st.count = binary.BigEndian.Uint32(data[33:37])
	st.last = int64(binary.BigEndian.Uint64(data[37:45]))
	return nil
}

func (st *loopState) marshal(dst []byte) []byte {
	dst = append(dst, loopVersion)
	dst = append(dst, st.fp[:]...)
	dst = binary.BigEndian.AppendUint32(dst, st.count)
	return binary.BigEndian.AppendUint64(dst, uint64(st.last))
}

// ttl: a run ends window after its last call.
func (st *loopState) ttl() time.Duration { return time.Duration(st.window) + ttlSlack }
