package capacity

import (
	"cmp"
	"math"
	"time"

	"github.com/toolwire/toolwire/internal/poolview"
)

// DefaultHighWater is the share of a store's byte limit past which a
// dispatcher refuses the calls that would write it (Reading.RefusesCalls):
// poolview.DefaultStoreHighWater, the dispatcher's default
// Config.StoreHighWater.
const DefaultHighWater = poolview.DefaultStoreHighWater

// Status is one store's capacity: its use, and how fast it grows.
type Status struct {
	Reading
	// Used is the fraction of the nearer limit in use (bytes or
	// messages; a store may pass 1 when its limit was lowered); -1 =
	// unbounded. JetStream stops a store just under its limit, so a full
	// store reads a little under 1: see FullBytes and TimeToFull.
	Used float64
	// FullBytes is the bytes at which the store counts as full: for a
	// store that refuses calls as it fills (RefusesCalls) the dispatchers'
	// high-water share of MaxBytes, where new calls start being refused;
	// otherwise MaxBytes. -1 = no byte limit.
	FullBytes int64
	// Measured says that a rate was measured: two samples Over apart.
	// Without it GrowthBytes, GrowthMessages, BytesPerCall and TimeToFull
	// are unknown.
	Measured bool
	// Over is the time between the two samples the rate was measured
	// over.
	Over time.Duration
	// GrowthBytes and GrowthMessages are the net growth per second over
	// the window: what was written less what was removed (aged out,
	// pushed out, deleted, acknowledged), negative when the store
	// shrank.
	GrowthBytes, GrowthMessages float64
	// BytesPerCall is what the store took per call written to the calls
	// stream during the window: its mean stored message size times the
	// messages it took (by stream sequence) per call; -1 = unknown (no
	// call in the window, nothing stored, or the account).
	BytesPerCall float64
	// TimeToFull is how long until the store is full at its net growth
	// (FullBytes, or MaxMessages): 0 = full now (at or past FullBytes,
	// or with less room than its mean message under a limit); -1 = never
	// at this rate (not growing, unbounded, or what it takes within its
	// MaxAge at its write rate is under the limit) or not measured.
	TimeToFull time.Duration
	// ArchiveLag is how far the archive is behind the store; -1 = no
	// archive reports one (the column shows "-").
	ArchiveLag time.Duration
}

// Compute gives the status of every store of last, with the rate of
// growth measured from first (an earlier sample of the same installation;
// a zero Sample, or one not earlier than last, measures nothing).
// highWater is the dispatchers' StoreHighWater, the share of a byte limit
// at which a store that refuses calls counts as full; 0 =
// DefaultHighWater.
func Compute(first, last Sample, highWater float64) []Status {
	highWater = cmp.Or(highWater, DefaultHighWater)
	before := make(map[string]Reading, len(first.Stores))
	for _, r := range first.Stores {
		before[r.Name] = r
	}
	over := last.At.Sub(first.At)
	calls := int64(last.Calls) - int64(first.Calls)
	out := make([]Status, 0, len(last.Stores))
	for _, r := range last.Stores {
		s := Status{Reading: r, Used: used(r), FullBytes: r.MaxBytes, BytesPerCall: -1, TimeToFull: -1, ArchiveLag: -1}
		if r.RefusesCalls && r.MaxBytes > 0 {
			s.FullBytes = int64(highWater * float64(r.MaxBytes))
		}
		if b, ok := before[r.Name]; ok && !first.At.IsZero() && over > 0 {
			s.measure(b, over, calls)
		}
		if s.full() {
			s.TimeToFull = 0
		}
		out = append(out, s)
	}
	return out
}

// full says that s takes no more: at or past FullBytes, with less room
// under MaxBytes than its mean message (JetStream refuses, or makes room
// for, the message that would cross the limit), or at MaxMessages.
func (s *Status) full() bool {
	if s.FullBytes > 0 && int64(s.Bytes) >= s.FullBytes {
		return true
	}
	if s.MaxBytes > 0 && s.Messages > 0 && float64(s.MaxBytes)-float64(s.Bytes) < s.meanSize() {
		return true
	}
	return s.MaxMessages > 0 && int64(s.Messages) >= s.MaxMessages
}

// meanSize is the mean stored message size; 0 when nothing is stored.
func (s *Status) meanSize() float64 {
	if s.Messages == 0 {
		return 0
	}
	return float64(s.Bytes) / float64(s.Messages)
}

// measure fills the rates of s from the earlier reading b, over apart,
// during which calls calls were written.
func (s *Status) measure(b Reading, over time.Duration, calls int64) {
	s.Measured, s.Over = true, over
	s.GrowthBytes = float64(int64(s.Bytes)-int64(b.Bytes)) / over.Seconds()
	s.GrowthMessages = float64(int64(s.Messages)-int64(b.Messages)) / over.Seconds()
	written := int64(s.Written) - int64(b.Written) // messages taken, -1 = unknown
	if written < 0 || s.IsAccount() {
		written = -1
	}
	if calls > 0 && s.Messages > 0 && written >= 0 {
		s.BytesPerCall = s.meanSize() * float64(written) / float64(calls)
	}
	ttf := math.Inf(1)
	if s.FullBytes > 0 && s.GrowthBytes > 0 && !s.agesOut(float64(s.FullBytes), s.meanSize()*float64(written)/over.Seconds()) {
		ttf = min(ttf, float64(s.FullBytes-int64(s.Bytes))/s.GrowthBytes)
	}
	if s.MaxMessages > 0 && s.GrowthMessages > 0 && !s.agesOut(float64(s.MaxMessages), float64(written)/over.Seconds()) {
		ttf = min(ttf, float64(s.MaxMessages-int64(s.Messages))/s.GrowthMessages)
	}
	// Beyond what a Duration holds (~292 years) is never, in practice.
	if ttf < float64(math.MaxInt64)/float64(time.Second) {
		s.TimeToFull = time.Duration(max(ttf, 0) * float64(time.Second))
	}
}

// agesOut says that the store never reaches limit (bytes or messages)
// at its write rate (per second; negative or zero when unknown): what it
// takes within its MaxAge, at that rate, is less — its oldest age out
// faster than it fills. A store filling up towards that balance grows
// meanwhile, and would otherwise be read as filling.
func (s *Status) agesOut(limit, rate float64) bool {
	return s.MaxAge > 0 && rate > 0 && rate*s.MaxAge.Seconds() < limit
}

// used is the fraction of r's nearer limit in use; -1 = unbounded.
func used(r Reading) float64 {
	u := -1.0
	if r.MaxBytes > 0 {
		u = float64(r.Bytes) / float64(r.MaxBytes)
	}
	if r.MaxMessages > 0 {
		u = max(u, float64(r.Messages)/float64(r.MaxMessages))
	}
	return u
}
