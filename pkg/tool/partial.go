package tool

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The bounds of a call attempt's partial output (Partial). The bytes are
// those of the encoded content blocks.
const (
	// MaxPartialChunks is how many chunks an attempt may send.
	MaxPartialChunks = 1000
	// MaxPartialBytes is how many bytes an attempt's chunks may hold in
	// all.
	MaxPartialBytes = 1 << 20
	// MaxPartialChunkBytes is how many bytes one chunk may hold.
	MaxPartialChunkBytes = 64 << 10
)

// ErrPartialLimit is returned by Partial when the chunk would take the
// attempt's partial output over MaxPartialChunks or MaxPartialBytes, and
// by every later Partial of the attempt: the chunk is not sent, and
// nothing more is. The call goes on; its result is what it returns.
var ErrPartialLimit = errors.New("tool: partial output over its bound for the attempt")

// ErrPartialTooLarge is returned (wrapped) by Partial for a chunk over
// MaxPartialChunkBytes: that chunk is not sent; later, smaller ones are.
var ErrPartialTooLarge = errors.New("tool: partial output chunk too large")

// ErrPartialClosed is returned (wrapped or not) by Partial once the
// attempt has ended: settled (its result is being published) or abandoned
// by the worker. The chunk is not sent, nor is any later one: no partial
// output is stored after the result.
var ErrPartialClosed = errors.New("tool: partial output closed: the attempt has ended")

// PartialReporter is a Reporter that takes partial output. Workers
// install one.
type PartialReporter interface {
	Reporter
	// Partial takes one chunk of the attempt's partial output. seq numbers
	// the chunks from 1; Partial is called once per chunk, one call at a
	// time, in seq order. content is the reporter's to keep. It returns
	// ErrPartialClosed once the attempt has ended; the chunk is not sent.
	Partial(seq uint32, content []*toolwirev1.Content) error
	// Heartbeat notes that the tool is alive without sending anything:
	// Partial calls it for a chunk it refuses (a bound, a nil block), which
	// counts as a heartbeat all the same.
	Heartbeat()
}

// Partial sends partial output of the running call: content blocks that
// become a PROGRESS event with CallEvent.partial (numbered by
// CallEvent.partial_seq, from 1 in each attempt), which Watch streams and
// the MCP face sends to a client that gave a progress token, all before
// the call's result. The result is what the tool returns: partial output
// is not part of it. Partial counts as a heartbeat, as Progress does, even
// when it refuses the chunk. Once the attempt has ended (the tool has
// returned, or the worker abandoned it) Partial returns ErrPartialClosed
// and sends nothing.
//
// An attempt's partial output is bounded: a chunk over
// MaxPartialChunkBytes is refused with ErrPartialTooLarge; the chunk that
// would go over MaxPartialChunks or MaxPartialBytes gets ErrPartialLimit,
// as does every later call, and nothing more is sent. Partial returns an
// error for a nil block. The blocks are copied: the caller may reuse
// them. Partial with no blocks, outside a call, or under a reporter that
// takes no partial output (not a PartialReporter) sends nothing and
// returns nil. It is safe for concurrent use by goroutines of one call;
// the chunks are numbered in the order Partial took them.
func Partial(ctx context.Context, content ...*toolwirev1.Content) error {
	rp, ok := ctx.Value(reporterKey{}).(*reporting)
	if !ok || len(content) == 0 {
		return nil
	}
	pr, ok := rp.r.(PartialReporter)
	if !ok {
		return nil
	}
	blocks := make([]*toolwirev1.Content, len(content))
	size := 0
	for i, c := range content {
		if c == nil {
			pr.Heartbeat()
			return errors.New("tool: Partial: nil content block")
		}
		blocks[i] = proto.CloneOf(c)
		size += proto.Size(c)
	}
	if size > MaxPartialChunkBytes {
		pr.Heartbeat()
		return fmt.Errorf("%w: %d bytes, at most %d", ErrPartialTooLarge, size, MaxPartialChunkBytes)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.closed || rp.chunks+1 > MaxPartialChunks || rp.bytes+size > MaxPartialBytes {
		rp.closed = true
		pr.Heartbeat()
		return ErrPartialLimit
	}
	if err := pr.Partial(uint32(rp.chunks+1), blocks); err != nil {
		return err
	}
	rp.chunks++
	rp.bytes += size
	return nil
}

// PartialText sends text as partial output of the running call: Partial
// with one text block.
func PartialText(ctx context.Context, text string) error {
	return Partial(ctx, Text(text))
}
