package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/output"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrBadOutputRead is returned by GetOutput for a request it cannot
// serve as asked: a negative offset or limit, or a pattern that does not
// compile within output.Compile's bounds. The API answers
// invalid_argument.
var ErrBadOutputRead = errors.New("dispatch: invalid output read")

// ErrOutputGone is returned by GetOutput when a call's result names a
// full output the blob store no longer holds (removed by its limits). The
// API answers not_found.
var ErrOutputGone = errors.New("dispatch: the full output is no longer stored")

// outputReadTime bounds one GetOutput: a read streams the output from its
// start, so its time grows with the offset.
const outputReadTime = time.Minute

// maxProtoOutput bounds the whole response read to serve a result stored
// by a worker that stored no output text (ResponseMeta.full_text), read
// into memory.
const maxProtoOutput = 64 << 20

// GetOutput reads the output text (package output) of a finished call of
// the caller's tenant: a byte range, or the lines that match req.Grep.
// The whole output is read when the inline response was truncated (from
// the blob store), the inline response otherwise. A call not finished
// answers its state only. Each read counts, while it runs, as one of the
// caller's waiting requests (Config.MaxWaitingPerCaller).
func (d *Dispatcher) GetOutput(ctx context.Context, id identity.Identity, req *toolwirev1.GetOutputRequest) (*toolwirev1.GetOutputResponse, error) {
	if err := identity.CheckTenant(id); err != nil {
		return nil, err
	}
	if req.GetOffset() < 0 || req.GetLimit() < 0 {
		return nil, fmt.Errorf("%w: offset and limit must not be negative", ErrBadOutputRead)
	}
	var re *regexp.Regexp
	if req.GetGrep() != "" {
		var err error
		if re, err = output.Compile(req.GetGrep()); err != nil {
			return nil, fmt.Errorf("%w: grep: %w", ErrBadOutputRead, err)
		}
	}
	if err := d.caps.acquire(capWaiting, id, d.cfg.MaxWaitingPerCaller); err != nil {
		return nil, err
	}
	defer d.caps.release(capWaiting, id)
	ctx, cancel := context.WithTimeout(ctx, outputReadTime)
	defer cancel()

	res, err := d.GetResult(ctx, id, req.GetCallId(), 0)
	if err != nil {
		return nil, err
	}
	out := &toolwirev1.GetOutputResponse{CallId: req.GetCallId(), State: res.GetState()}
	if res.GetState() != toolwirev1.CallState_CALL_STATE_DONE {
		return out, nil
	}
	resp := res.GetResponse()
	out.Truncated = resp.GetMeta().GetTruncated()
	src, size, err := d.outputOf(ctx, req.GetCallId(), resp)
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Close() }()
	var rng output.Range
	if re != nil {
		rng, err = output.Grep(ctx, src, re, req.GetOffset(), req.GetLimit())
	} else {
		rng, err = output.Read(ctx, src, req.GetOffset(), req.GetLimit())
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch: read output of %s: %w", req.GetCallId(), err)
	}
	out.Text, out.Lines, out.Offset, out.NextOffset = rng.Text, rng.Lines, rng.Offset, rng.Next
	out.Size, out.Eof = size, rng.Next >= size
	return out, nil
}

// outputOf opens the output text of resp, the result of callID: the
// stored output text when it was truncated, else the inline response's.
// The blobs a result names must be the call's own, in this installation's
// bucket: a result is written by a worker, never by a caller, but a
// reference is still not followed outside the call.
func (d *Dispatcher) outputOf(ctx context.Context, callID string, resp *toolwirev1.ToolResponse) (io.ReadCloser, int64, error) {
	m := resp.GetMeta()
	ref := m.GetFullText()
	if ref == nil {
		ref = m.GetFullOutput()
	}
	if ref == nil {
		if m.GetTruncated() {
			// Cut, and the worker could not store the whole: what is
			// inline is not all of it.
			return nil, 0, ErrOutputGone
		}
		text := output.Text(resp)
		return io.NopCloser(strings.NewReader(text)), int64(len(text)), nil
	}
	if ref.GetBucket() != d.bus.Config.BlobBucket() || !strings.HasPrefix(ref.GetName(), callID+".") {
		return nil, 0, fmt.Errorf("dispatch: the result of %s names blob %s/%s, not one of the call's", callID, ref.GetBucket(), ref.GetName())
	}
	obj, err := d.bus.Blobs.Get(ctx, ref.GetName())
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, 0, fmt.Errorf("%w: call %s, blob %s", ErrOutputGone, callID, ref.GetName())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dispatch: open output of %s: %w", callID, err)
	}
	info, err := obj.Info()
	if err != nil {
		_ = obj.Close()
		return nil, 0, fmt.Errorf("dispatch: open output of %s: %w", callID, err)
	}
	if m.GetFullText() != nil {
		return obj, int64(info.Size), nil
	}
	// A result stored without an output text: the whole response, decoded
	// in memory (bounded).
	defer func() { _ = obj.Close() }()
	if info.Size > maxProtoOutput {
		return nil, 0, fmt.Errorf("dispatch: the full response of %s is %d bytes, over the %d this read takes", callID, info.Size, maxProtoOutput)
	}
	data, err := io.ReadAll(io.LimitReader(obj, maxProtoOutput+1))
	if err != nil {
		return nil, 0, fmt.Errorf("dispatch: read full response of %s: %w", callID, err)
	}
	full := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(data, full); err != nil {
		return nil, 0, fmt.Errorf("dispatch: decode full response of %s: %w", callID, err)
	}
	text := output.Text(full)
	return io.NopCloser(strings.NewReader(text)), int64(len(text)), nil
}
