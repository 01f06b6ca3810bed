package dispatch

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolwire/toolwire/internal/archive"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// findResult is loadResult, then, with an archive store
// (Config.Archive) and no result in the stream, the believed result the
// archive holds of a call older than the results stream reaches
// (believed.Reader.ReadArchived: checked exactly as a live one). It is
// the first look of GetResult, Watch, Cancel and an answer that
// continues a call: a call's result, once found, is its answer for good.
// The later looks of a wait read the stream alone (a result arriving
// now is live).
func (d *Dispatcher) findResult(ctx context.Context, subject, tool string) (*toolwirev1.ToolResponse, error) {
	return d.orArchived(ctx, subject, tool)(d.loadResult(ctx, subject, tool))
}

// orArchived returns what completes a live look's answer (resp, err)
// with the archive's: the look's own when it found a result, failed, or
// there is no archive. The archive is read only for a call a stored
// call stands behind (tool not ""), and only up to the call's deadline
// (remembered by callTool) and an hour, or 720h after its time without
// one (believed.ArchivedQuery).
func (d *Dispatcher) orArchived(ctx context.Context, subject, tool string) func(*toolwirev1.ToolResponse, error) (*toolwirev1.ToolResponse, error) {
	return func(resp *toolwirev1.ToolResponse, err error) (*toolwirev1.ToolResponse, error) {
		if err != nil || resp != nil || d.archive == nil || tool == "" {
			return resp, err
		}
		q := believed.ArchivedQuery{Filter: subject, Tool: tool, End: d.tools.end(subject[strings.LastIndexByte(subject, '.')+1:])}
		return d.believedResp(d.answers().ReadArchived(ctx, d.archive, q))
	}
}

// archivedCall is scanCalls in the archive of the calls stream, for a
// call older than the stream reaches (its first message was stored after
// the call's time less callArgsSlack, or it holds none): the first call
// q names archived from that time until callArgsSlack and half the
// duplicate window after it; nil when there is none or no archive. Only
// dispatchers write calls, and the archive keeps them as stored.
func (d *Dispatcher) archivedCall(ctx context.Context, q callScan) (*toolwirev1.ToolCall, error) {
	if d.archive == nil {
		return nil, nil
	}
	info, err := d.bus.Calls.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dispatch: read calls: %w", err)
	}
	if info.State.Msgs > 0 && info.State.FirstTime.Before(q.at.Add(-callArgsSlack)) {
		return nil, nil // the stream reaches back to the call: scanCalls' answer stands
	}
	filter := d.subj.CallsOf(q.tenant, q.tool)
	var call *toolwirev1.ToolCall
	aq := archive.Query{Since: q.at.Add(-callArgsSlack), Until: q.at.Add(callArgsSlack + d.bus.Config.DuplicateWindow/2)}
	err = d.archive.Each(ctx, d.callsStream, aq, func(m *archive.Message) bool {
		if bus.SubjectMatches(filter, m.Subject) {
			call = q.match(m.Header.Get(jetstream.MsgIDHeader), m.Data)
		}
		return call == nil
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: read archived calls: %w", err)
	}
	return call, nil
}

// newArchiveReader is the reader of the archive store (nil without one).
func newArchiveReader(cfg Config) *archive.Reader {
	if cfg.Archive == nil {
		return nil
	}
	return archive.NewReader(cfg.Archive)
}
