package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/envelope"

	"github.com/toolwire/toolwire/internal/output"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// outputLimits are the inline limits of a call's output text (package
// output); 0 = none.
type outputLimits struct {
	bytes, lines int64
	tail         bool
}

// limitsOf returns the output limits of the spec this worker serves for
// call (none when it serves no such spec: the call is refused anyway).
func (w *Worker) limitsOf(call *toolwirev1.ToolCall) outputLimits {
	ent := (*w.specs.Load())[call.GetTool()]
	if ent == nil || (call.SpecVersion != "" && call.SpecVersion != ent.Spec.Version) {
		return outputLimits{}
	}
	l := ent.Spec.GetLimits()
	return outputLimits{bytes: max(l.GetMaxOutputBytes(), 0), lines: int64(max(l.GetMaxOutputLines(), 0)),
		tail: l.GetTruncate() == toolwirev1.TruncateDirection_TRUNCATE_DIRECTION_TAIL}
}

// over reports whether resp passes the limits: its output text's bytes or
// lines, or its structured JSON's bytes.
func (l outputLimits) over(resp *toolwirev1.ToolResponse) bool {
	if l.bytes == 0 && l.lines == 0 {
		return false
	}
	if l.bytes > 0 && int64(len(resp.StructuredJson)) > l.bytes {
		return true
	}
	text := output.Text(resp)
	return (l.bytes > 0 && int64(len(text)) > l.bytes) || (l.lines > 0 && output.Lines(text) > l.lines)
}

// fitInline encodes resp for the results stream. When its output passes
// the tool's limits (limits.max_output_bytes and max_output_lines), or the
// encoding is over MaxInlineBytes, the whole response and its output text
// go to the blob store, and the inline response keeps what fits of the
// text, from its head or its tail (limits.truncate), with a marker line
// saying how to read the rest (cut), truncated=true and references to
// both blobs. resp has been redacted already (finish).
func (w *Worker) fitInline(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) ([]byte, error) {
	data, err := proto.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("worker: marshal response: %w", err)
	}
	if resp.GetInputRequired() != nil && len(data) > w.cfg.MaxInlineBytes {
		// A request for input is never cut: the caller could not answer
		// half of it.
		te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_INTERNAL,
			Message:            fmt.Sprintf("the tool's request for input is %d bytes, over the inline limit of %d", len(data), w.cfg.MaxInlineBytes),
			PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_POSSIBLE}
		return proto.Marshal(envelope.Error(resp.CallId, resp.Tool, te, resp.Meta))
	}
	lim := w.limitsOf(call)
	if len(data) <= w.cfg.MaxInlineBytes && !lim.over(resp) {
		return data, nil
	}
	text := output.Text(resp)
	// Per attempt: a concurrent duplicate attempt must not overwrite the
	// blobs the stored result points at.
	// The copies are optional; the result is not: a copy that cannot be
	// stored (a full or unreachable blob store) leaves the cut response
	// without its reference (GetOutput then answers that the full output
	// is gone) rather than losing what the tool did.
	full, err := w.putBlob(ctx, fmt.Sprintf("%s.%d.response.pb", call.CallId, call.Attempt), data,
		"application/x-protobuf; messageType=toolwire.v1.ToolResponse")
	if err != nil {
		w.log.WarnContext(ctx, "full response not stored; the result keeps what fits inline", "call_id", call.CallId, "err", err)
		full = nil
	}
	fullText, err := w.putBlob(ctx, fmt.Sprintf("%s.%d.output.txt", call.CallId, call.Attempt), []byte(text),
		"text/plain; charset=utf-8")
	if err != nil {
		w.log.WarnContext(ctx, "full output text not stored; the result keeps what fits inline", "call_id", call.CallId, "err", err)
		fullText = nil
	}
	if lim.bytes > 0 || lim.lines > 0 {
		short := cut(resp, text, lim, cutOptions{callID: call.CallId})
		short.Meta.Truncated, short.Meta.FullOutput, short.Meta.FullText = true, full, fullText
		out, err := proto.Marshal(short)
		if err != nil {
			return nil, fmt.Errorf("worker: marshal truncated response: %w", err)
		}
		if len(out) <= w.cfg.MaxInlineBytes {
			return out, nil
		}
	}
	// Still too large (other blocks, the tool's limits above the inline
	// one): half the inline limit of text, nothing else.
	budget := int64(w.cfg.MaxInlineBytes / 2)
	lim.bytes = min(cmpOr(lim.bytes, math.MaxInt64), budget)
	short := cut(resp, text, lim, cutOptions{callID: call.CallId, bare: true})
	if int64(len(short.MetaJson)) > budget/2 {
		short.MetaJson = ""
	}
	short.Meta.Truncated, short.Meta.FullOutput, short.Meta.FullText = true, full, fullText
	out, err := proto.Marshal(short)
	if err != nil {
		return nil, fmt.Errorf("worker: marshal truncated response: %w", err)
	}
	return out, nil
}

func cmpOr(v, or int64) int64 {
	if v > 0 {
		return v
	}
	return or
}

// putBlob stores data in the blob store under name.
func (w *Worker) putBlob(ctx context.Context, name string, data []byte, mime string) (*toolwirev1.BlobRef, error) {
	if _, err := w.bus.Blobs.PutBytes(ctx, name, data); err != nil {
		return nil, fmt.Errorf("worker: store full output: %w", err)
	}
	sum := sha256.Sum256(data)
	return &toolwirev1.BlobRef{Bucket: w.bus.Config.BlobBucket(), Name: name, Size: int64(len(data)),
		Sha256: hex.EncodeToString(sum[:]), MimeType: mime}, nil
}

// cutOptions say how cut marks and trims a response.
type cutOptions struct {
	callID string // the call the marker line names
	bare   bool   // keep text blocks only, without their _meta
}

// cut returns a copy of resp whose output text (text, of resp) is cut to
// lim, the marker line included, keeping the head or the tail. Text
// blocks keep their order, annotations and `_meta`, the block across the
// cut is shortened and those beyond it are left out; other blocks stay
// where they were when on the kept side. Structured JSON longer than the
// byte limit is left out (it cannot be cut and stay JSON); when the
// response has no text block its structured JSON is the text, cut into a
// text block. Bare keeps text blocks only.
func cut(resp *toolwirev1.ToolResponse, text string, lim outputLimits, opt cutOptions) *toolwirev1.ToolResponse {
	short := proto.CloneOf(resp)
	if short.Meta == nil {
		short.Meta = &toolwirev1.ResponseMeta{}
	}
	noText := !hasText(resp)
	if noText || opt.bare || (lim.bytes > 0 && int64(len(short.StructuredJson)) > lim.bytes) {
		short.StructuredJson = ""
	}
	content := resp.Content
	if noText && text != "" {
		content = append(content[:len(content):len(content)], tool.Text(text))
	}
	k, marker := cutPoint(text, lim, opt.callID)
	short.Content = textCut{text: text, k: k, marker: marker, tail: lim.tail, bare: opt.bare}.blocks(content)
	return short
}

// cutPoint returns where text is cut to lim, the marker line included
// (text[:k] is kept for a head, text[k:] for a tail), and the marker.
func cutPoint(text string, lim outputLimits, callID string) (k int, marker string) {
	total, lines := int64(len(text)), output.Lines(text)
	mark := func(keptLines, keptBytes, from int64) string {
		if lim.tail {
			return fmt.Sprintf("[output truncated: showing the last %d of %d lines (%d of %d bytes, from byte %d); the whole output: toolctl output %s]",
				keptLines, lines, keptBytes, total, from, callID)
		}
		return fmt.Sprintf("[output truncated: showing the first %d of %d lines (%d of %d bytes); read on with: toolctl output %s --offset %d]",
			keptLines, lines, keptBytes, total, callID, from)
	}
	// The marker's length with the largest numbers it can carry, so that
	// the real one is no longer.
	room := int64(len(mark(lines, total, total)))
	budgetBytes, budgetLines := int64(math.MaxInt64), int64(math.MaxInt64)
	if lim.bytes > 0 {
		budgetBytes = max(lim.bytes-room-1, 0) // the marker and its newline
	}
	if lim.lines > 0 {
		budgetLines = max(lim.lines-1, 0)
	}
	if lim.tail {
		k = tailCut(text, budgetBytes, budgetLines)
		kept := text[k:]
		marker = mark(output.Lines(kept), int64(len(kept)), int64(k))
	} else {
		k = headCut(text, budgetBytes, budgetLines)
		kept := text[:k]
		marker = mark(output.Lines(kept), int64(k), int64(k))
	}
	if lim.bytes > 0 && int64(len(marker)) > lim.bytes {
		marker = shorten("[output truncated]", lim.bytes)
	}
	return k, marker
}

// textCut is a cut of an output text at k, with its marker line.
type textCut struct {
	text       string
	k          int
	marker     string
	tail, bare bool
}

// blocks returns the content blocks (whose text blocks, joined by
// newlines, are c.text) kept by the cut, the marker first for a tail and
// last for a head.
func (c textCut) blocks(content []*toolwirev1.Content) []*toolwirev1.Content {
	text, k, tail := c.text, c.k, c.tail
	out := make([]*toolwirev1.Content, 0, len(content)+1)
	if tail {
		out = append(out, tool.Text(c.marker))
	}
	pos := 0 // where the next text block starts in text
	seen := false
	for _, b := range content {
		t, ok := b.GetKind().(*toolwirev1.Content_Text)
		if !ok {
			// Other blocks stay when on the kept side of the cut.
			if !c.bare && ((!tail && pos <= k) || (tail && pos >= k)) {
				out = append(out, b)
			}
			continue
		}
		if seen {
			pos++ // the newline joining it to the previous block
		}
		seen = true
		start, end := pos, pos+len(t.Text.GetText())
		pos = end
		var keep string
		switch {
		case (!tail && k == 0) || (tail && k == len(text)):
			continue // no text kept: not even an empty block (and its newline)
		case !tail && end <= k, tail && start >= k:
			keep = t.Text.GetText()
		case !tail && start < k:
			keep = text[start:k]
		case tail && end > k:
			keep = text[k:end]
		default:
			continue
		}
		kb := proto.CloneOf(b)
		kb.GetText().Text = keep
		if c.bare {
			kb.MetaJson = ""
		}
		out = append(out, kb)
	}
	if !tail {
		out = append(out, tool.Text(c.marker))
	}
	return out
}

func hasText(resp *toolwirev1.ToolResponse) bool {
	for _, c := range resp.GetContent() {
		if c.GetText() != nil {
			return true
		}
	}
	return false
}

// headCut returns the end of the longest head of text within maxBytes and
// maxLines, at a character boundary, less a newline it ends with (the
// marker's newline follows it: joined, they are at most maxLines+1
// lines).
func headCut(text string, maxBytes, maxLines int64) int {
	end := len(text)
	if maxLines < int64(len(text)) { // else no cut by lines is possible
		i, n := 0, int64(0)
		for n < maxLines {
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				i = len(text)
				break
			}
			i += j + 1
			n++
		}
		if n == maxLines {
			end = i
		}
	}
	if int64(end) > maxBytes {
		end = int(maxBytes)
	}
	for end > 0 && end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	if end > 0 && text[end-1] == '\n' {
		end-- // one: the marker's newline takes its place
	}
	return end
}

// tailCut returns the start of the longest tail of text within maxBytes
// and maxLines, at a character boundary (the marker line and a newline
// precede it: at most maxLines+1 lines).
func tailCut(text string, maxBytes, maxLines int64) int {
	start := 0
	if maxLines < int64(len(text)) { // else no cut by lines is possible
		i := len(text)
		if i > 0 && text[i-1] == '\n' {
			i-- // the last line's own newline
		}
		// Back over maxLines newlines: text[i+1:] holds the last maxLines
		// lines (all of text when it has no more).
		for n := int64(0); n < maxLines && i >= 0; n++ {
			i = strings.LastIndexByte(text[:i], '\n')
		}
		start = min(i+1, len(text)) // maxLines 0: nothing
	}
	if int64(len(text)-start) > maxBytes {
		start = len(text) - int(maxBytes)
	}
	for start < len(text) && !utf8.RuneStart(text[start]) {
		start++
	}
	return start
}

// shorten cuts s to at most n bytes at a character boundary.
func shorten(s string, n int64) string {
	if int64(len(s)) <= n {
		return s
	}
	end := int(n)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
