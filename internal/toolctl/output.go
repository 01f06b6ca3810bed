package toolctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// printProto prints m as indented protobuf JSON (the API's JSON form).
// The spacing is json.Indent's: protojson's own varies on purpose.
func (a *app) printProto(m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return a.printJSON(b)
}

// printProtoLine prints m as protobuf JSON on one line, for streams of
// objects (JSON lines).
func (a *app) printProtoLine(m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return a.printJSONLine(b)
}

// printJSONLine prints a JSON document compacted onto one line.
func (a *app) printJSONLine(doc []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return fmt.Errorf("invalid JSON output: %w", err)
	}
	buf.WriteByte('\n')
	_, err := a.io.Stdout.Write(buf.Bytes())
	return err
}

// printJSON prints a JSON document indented.
func (a *app) printJSON(doc []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return fmt.Errorf("invalid JSON output: %w", err)
	}
	buf.WriteByte('\n')
	_, err := a.io.Stdout.Write(buf.Bytes())
	return err
}

// printContent prints a successful result for a reader: its content
// blocks on stdout (the structured output when there are none), then its
// intents and truncation notes on stderr.
func (a *app) printContent(res *client.Result) {
	var out strings.Builder
	for _, c := range res.Content() {
		out.WriteString(block(c))
		if !strings.HasSuffix(out.String(), "\n") {
			out.WriteByte('\n')
		}
	}
	if out.Len() == 0 && res.Response.GetStructuredJson() != "" {
		out.WriteString(res.Response.GetStructuredJson())
		out.WriteByte('\n')
	}
	fmt.Fprint(a.io.Stdout, out.String())
	for _, in := range res.Intents() {
		fmt.Fprintf(a.io.Stderr, "intent: %s %s\n", in.GetType(), in.GetPayloadJson())
	}
	if m := res.Response.GetMeta(); m.GetTruncated() {
		fmt.Fprintf(a.io.Stderr, "note: the output was truncated to the tool's limits; read all of it with: toolctl output %s\n", res.CallID)
	}
}

// block renders one content block as text; blocks that are not text are
// described in brackets.
func block(c *toolwirev1.Content) string {
	switch k := c.GetKind().(type) {
	case *toolwirev1.Content_Text:
		return k.Text.GetText()
	case *toolwirev1.Content_Image:
		return fmt.Sprintf("[image %s, %d bytes]", k.Image.GetMimeType(), len(k.Image.GetData()))
	case *toolwirev1.Content_Audio:
		return fmt.Sprintf("[audio %s, %d bytes]", k.Audio.GetMimeType(), len(k.Audio.GetData()))
	case *toolwirev1.Content_ResourceLink:
		return fmt.Sprintf("[resource link %s]", k.ResourceLink.GetUri())
	case *toolwirev1.Content_Resource:
		if t, ok := k.Resource.GetContents().(*toolwirev1.EmbeddedResource_Text); ok {
			return t.Text
		}
		return fmt.Sprintf("[resource %s %s, %d bytes]", k.Resource.GetUri(), k.Resource.GetMimeType(), len(k.Resource.GetBlob()))
	}
	return "[unknown content]"
}

// printToolError prints a failed result on stderr: "error: TYPE: message",
// one line per offending field, then the suggestion and retry advice.
func (a *app) printToolError(res *client.Result) {
	var te *client.ToolError
	if !errors.As(res.Err(), &te) {
		return
	}
	w := a.io.Stderr
	fmt.Fprintf(w, "error: %s: %s\n", client.TypeName(te.Type), te.Message)
	for _, v := range te.Violations {
		field := v.GetField()
		if field == "" {
			field = "(root)"
		}
		fmt.Fprintf(w, "  %s: %s\n", field, v.GetMessage())
	}
	if te.Suggestion != "" {
		fmt.Fprintf(w, "suggestion: %s\n", te.Suggestion)
	}
	if te.Retryable {
		if te.RetryAfter > 0 {
			fmt.Fprintf(w, "retryable: after %s\n", te.RetryAfter)
		} else {
			fmt.Fprintln(w, "retryable: yes")
		}
	}
	if se := te.SideEffects; se != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE &&
		se != toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_UNSPECIFIED {
		fmt.Fprintf(w, "side effects: %s\n", strings.TrimPrefix(se.String(), "PARTIAL_SIDE_EFFECTS_"))
	}
}
