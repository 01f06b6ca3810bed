package limits

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// MaxPeriod is the longest cycle the loop guard sees: a run of one call
// (A, A, A, …), of two (A, B, A, B, …) or of three (A, B, C, A, B, C, …).
const MaxPeriod = 3

// Run is the loop guard's run a call belongs to: Count repetitions of a
// cycle of Period calls (1: the same call again and again), this call's
// included.
type Run struct {
	Count  int
	Period int
}

// Repeat counts the loop guard's run on scope, this call included: how
// many times in a row the cycle fingerprint closes has been made in scope.
// For each period p from 1 to MaxPeriod the guard keeps how many of the
// scope's latest calls follow that period (each the same as the call p
// before it; the first p of a run are free); a run of m such calls is
// m/p repetitions (rounded down), and the run answered is the period with
// the most repetitions (the shortest on a tie). So A, A, A counts 3 (period
// 1), A, B, A, B, A, B counts 3 (period 2), and A, B, C, A, B, C counts 2
// (period 3). A call that breaks a period starts that period over; a
// pause longer than window starts every period over, at 1. Every call
// writes.
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
func (s *Store) Repeat(ctx context.Context, scope Key, fingerprint string, window time.Duration, now time.Time) (Run, error) {
	var fp [32]byte
	if len(fingerprint) != 64 {
		return Run{}, fmt.Errorf("%w: fingerprint of %d characters, want 64 hex digits", ErrInvalid, len(fingerprint))
	}
	if _, err := hex.Decode(fp[:], []byte(fingerprint)); err != nil {
		return Run{}, fmt.Errorf("%w: fingerprint is not hex", ErrInvalid)
	}
	if window < time.Second || window > maxHorizon {
		return Run{}, fmt.Errorf("%w: loop window %s not in 1s..366d", ErrInvalid, window)
	}
	k, err := scope.bucketKey(kindLoop)
	if err != nil {
		return Run{}, err
	}
	t := &repeatTxn{fp: fp, now: now.UnixNano(), window: int64(window)}
	if err := s.do(ctx, k, newLoopState, t); err != nil {
		return Run{}, err
	}
	return t.run, nil
}

type repeatTxn struct {
	fp          [32]byte
	now, window int64
	run         Run
}

func (t *repeatTxn) apply(s state) bool {
	st := s.(*loopState)
	if st.held == 0 || t.now-st.last > t.window {
		st.held, st.follow = 0, [MaxPeriod]uint32{}
	}
	for p := 1; p <= MaxPeriod; p++ {
		i := p - 1
		switch {
		case int(st.held) >= p && st.recent[i] == t.fp:
			if st.follow[i] < math.MaxUint32 {
				st.follow[i]++
			}
		default:
			// The last p calls, this one included, follow period p
			// trivially: fewer when fewer are held.
			st.follow[i] = uint32(min(int(st.held)+1, p))
		}
	}
	copy(st.recent[1:], st.recent[:MaxPeriod-1])
	st.recent[0] = t.fp
	st.held = uint8(min(int(st.held)+1, MaxPeriod))
	st.last = max(st.last, t.now)
	st.window = t.window
	t.run = Run{Count: 1, Period: 1}
	for p := 1; p <= MaxPeriod; p++ {
		if n := int(st.follow[p-1]) / p; n > t.run.Count {
			t.run = Run{Count: n, Period: p}
		}
	}
	return true
}

// loopState is the value of a loop-guard key, version 2: the scope's
// latest MaxPeriod fingerprints (the latest first; held of them are
// set), how many of its latest calls follow each period, and the time of
// its last call:
//
//	2 | held (1 byte) | 3 × 32 bytes of fingerprints | 3 × follow (big-endian uint32) | last (Unix nanoseconds, big-endian int64)
//
// 118 bytes. A version 1 value (one fingerprint and its run, 45 bytes, as
// written before cycles were seen) is read as a run of period 1.
type loopState struct {
	recent [MaxPeriod][32]byte
	held   uint8
	follow [MaxPeriod]uint32
	last   int64
	window int64 // the latest request's window
}

func newLoopState() state { return &loopState{} }

const (
	loopVersion   = 2
	loopV1Size    = 45
	loopStateSize = 1 + 1 + MaxPeriod*32 + MaxPeriod*4 + 8
)

func (st *loopState) reset(data []byte) error {
	*st = loopState{}
	switch {
	case data == nil:
		return nil
	case len(data) == loopV1Size && data[0] == 1:
		copy(st.recent[0][:], data[1:33])
		st.follow[0] = binary.BigEndian.Uint32(data[33:37])
		st.last = int64(binary.BigEndian.Uint64(data[37:45]))
		st.held = 1
		if st.follow[0] == 0 {
			st.held = 0
		}
		st.follow[1], st.follow[2] = min(st.follow[0], 2), min(st.follow[0], 3)
		return nil
	case len(data) != loopStateSize || data[0] != loopVersion || data[1] > MaxPeriod:
		return fmt.Errorf("loop value of %d bytes, version %d", len(data), versionOf(data))
	}
	st.held = data[1]
	off := 2
	for i := range st.recent {
		copy(st.recent[i][:], data[off:off+32])
		off += 32
	}
	for i := range st.follow {
		st.follow[i] = binary.BigEndian.Uint32(data[off:])
		off += 4
	}
	st.last = int64(binary.BigEndian.Uint64(data[off:]))
	return nil
}

func (st *loopState) marshal(dst []byte) []byte {
	dst = append(dst, loopVersion, st.held)
	for i := range st.recent {
		dst = append(dst, st.recent[i][:]...)
	}
	for _, f := range st.follow {
		dst = binary.BigEndian.AppendUint32(dst, f)
	}
	return binary.BigEndian.AppendUint64(dst, uint64(st.last))
}

// ttl: a run ends window after its last call.
func (st *loopState) ttl() time.Duration { return time.Duration(st.window) + ttlSlack }
