package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// fitInline encodes resp for the results stream. When the encoding is over
// MaxInlineBytes, the full response goes to the blob store and the inline
// response keeps the head of its text with a clear marker, truncated=true
// and a reference to the full output.
func (w *Worker) fitInline(ctx context.Context, call *toolwirev1.ToolCall, resp *toolwirev1.ToolResponse) ([]byte, error) {
	data, err := proto.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("worker: marshal response: %w", err)
	}
	if len(data) <= w.cfg.MaxInlineBytes {
		return data, nil
	}
	// Per attempt: a concurrent duplicate attempt must not overwrite the
	// blob the stored result points at.
	name := fmt.Sprintf("%s.%d.response.pb", call.CallId, call.Attempt)
	sum := sha256.Sum256(data)
	if _, err := w.bus.Blobs.PutBytes(ctx, name, data); err != nil {
		return nil, fmt.Errorf("worker: store full output: %w", err)
	}
	ref := &toolwirev1.BlobRef{Bucket: w.bus.Config.BlobBucket(), Name: name, Size: int64(len(data)),
		Sha256: hex.EncodeToString(sum[:]), MimeType: "application/x-protobuf; messageType=toolwire.v1.ToolResponse"}

	var text bytes.Buffer
	budget := w.cfg.MaxInlineBytes / 2
	for _, c := range resp.Content {
		if t := c.GetText(); t != nil {
			text.WriteString(t.Text)
			text.WriteByte('\n')
			if text.Len() > budget {
				break
			}
		}
	}
	head := text.Bytes()
	if len(head) > budget {
		head = head[:budget]
		for len(head) > 0 && !utf8.Valid(head) {
			head = head[:len(head)-1]
		}
	}
	short := proto.Clone(resp).(*toolwirev1.ToolResponse)
	short.Content = []*toolwirev1.Content{
		tool.Text(string(head)),
		tool.Text(fmt.Sprintf("[output truncated: the full response is %d bytes; stored as %s/%s]", len(data), ref.Bucket, ref.Name)),
	}
	if len(short.StructuredJson) > budget/2 {
		short.StructuredJson = ""
	}
	short.Intents = resp.Intents
	short.Meta.Truncated = true
	short.Meta.FullOutput = ref
	out, err := proto.Marshal(short)
	if err != nil {
		return nil, fmt.Errorf("worker: marshal truncated response: %w", err)
	}
	return out, nil
}
