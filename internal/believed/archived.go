package believed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// ArchiveSlack is how far around a call's time (the time in its id, the
// admitting dispatcher's clock) ReadArchived reaches: clock skew between
// that dispatcher and the stream's leader, which times what it stores.
const ArchiveSlack = time.Minute

// ArchiveHorizon bounds ReadArchived for a call whose end is not known
// (ArchivedQuery.End zero): results stored later than this after the
// call's time are not looked for (as archive.Reader.FindResult).
const ArchiveHorizon = 720 * time.Hour

// ArchiveResultSlack is how long after a call's end (its deadline) a
// result of it is still looked for in the archive.
const ArchiveResultSlack = time.Hour

// ArchivedQuery names the call whose result ReadArchived looks for.
type ArchivedQuery struct {
	// Filter is the call's result subject (as for Read); its last token
	// is the call id, a ULID whose time is the call's.
	Filter string
	// Tool is the call's tool as a dispatcher admitted it (whose
	// signature is believed). "" — no stored call was found — reads
	// nothing: a made-up id costs no archive read.
	Tool string
	// End is when the call ends (its deadline); zero when not known.
	End time.Time
}

// ReadArchived returns the first believed result of the call q names
// that the archive ar holds, when the results stream no longer holds
// results as old as the call: its first message was stored after the
// call's time less ArchiveSlack, or it holds none. It returns nil
// without reading the archive while the stream reaches back to the call
// (Read's answer is the whole answer then), for a call no stored call
// stands behind (q.Tool ""), and when the archive holds no believed
// result. It reads the archived results stored from the call's time less
// ArchiveSlack until the earlier of the stream's first message plus
// ArchiveSlack (what is older is archived, what is newer is live) and
// the call's end plus ArchiveResultSlack (ArchiveHorizon after its time
// when its end is not known) — so an id dated long before the archive's
// first segment reads none — on q.Filter's subjects, oldest first, at
// most MaxScan of them, and checks each with Check exactly as a live
// one: the archive keeps a result's headers and bytes as stored, so its
// signature verifies as it did (a refusal is told to OnRefused). A call
// id that is not a ULID has no result.
func (r Reader) ReadArchived(ctx context.Context, ar *archive.Reader, q ArchivedQuery) (*Stored, error) {
	filter, tool := q.Filter, q.Tool
	id, err := ulid.ParseStrict(filter[strings.LastIndexByte(filter, '.')+1:])
	if err != nil || tool == "" {
		return nil, nil
	}
	at := ulid.Time(id.Time())
	until := at.Add(ArchiveHorizon)
	if q.End.After(at) {
		until = q.End.Add(ArchiveResultSlack)
	}
	info, err := r.Stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("believed: results stream: %w", err)
	}
	first := info.State.FirstTime
	if info.State.Msgs == 0 {
		first = time.Now()
	}
	if first.Before(at.Add(-ArchiveSlack)) {
		return nil, nil // the live stream reaches back to the call
	}
	var found *Stored
	var lookupErr error
	n := 0
	aq := archive.Query{Since: at.Add(-ArchiveSlack), Until: first.Add(ArchiveSlack)}
	if until.Before(aq.Until) {
		aq.Until = until
	}
	err = ar.Each(ctx, info.Config.Name, aq, func(m *archive.Message) bool {
		if !bus.SubjectMatches(filter, m.Subject) {
			return true
		}
		n++
		found, lookupErr = r.check(ctx, &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Header: m.Header, Data: m.Data, Time: m.Time}, tool)
		return found == nil && signing.AsError(lookupErr) != nil && n < MaxScan
	})
	if err != nil {
		return nil, fmt.Errorf("believed: archived results: %w", err)
	}
	if found == nil && lookupErr != nil && signing.AsError(lookupErr) == nil {
		return nil, lookupErr
	}
	return found, nil
}
