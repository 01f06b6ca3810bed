package dispatch

import toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"

// PartialSeen tells the chunks of a call's partial output (PROGRESS
// events with partial, tool.Partial) a reader has already shown, by
// (attempt, partial_seq), so that it drops them: a signed chunk that the
// worker credential stores again (a replay) is shown once. An attempt's
// chunks are stored in order (one worker connection, one stream), and a
// reader starts over when the attempt changes, so a chunk of an attempt
// older than the newest seen, or numbered at most the newest seen of its
// attempt, counts as seen too. It keeps two numbers, however many events
// a call has. The zero value is ready; it is not safe for concurrent use.
type PartialSeen struct {
	attempt int32
	seq     uint32
}

// Seen reports whether ev is a chunk of partial output already seen (or
// older), and notes it. An event without partial output is never seen.
func (p *PartialSeen) Seen(ev *toolwirev1.CallEvent) bool {
	if len(ev.GetPartial()) == 0 {
		return false
	}
	a, s := ev.GetAttempt(), ev.GetPartialSeq()
	if a < p.attempt || a == p.attempt && s <= p.seq {
		return true
	}
	p.attempt, p.seq = a, s
	return false
}
