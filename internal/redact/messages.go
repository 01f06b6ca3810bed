package redact

import (
	"errors"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// The methods below redact the text of the fabric's messages in place:
// every field a person or a model reads. Nested messages that a tool may
// share between calls (contents, field violations) are replaced by
// redacted copies rather than changed. Not redacted: identifiers, binary
// data (images, audio, blobs), intents (structured data for an
// orchestrator, validated against their declared schemas), and a call's
// own arguments (the calls stream and dead letters keep them to run the
// call; see Plan.Arguments for showing them).

// ToolError redacts an error's message, suggestion and field violations.
func (s *Secrets) ToolError(te *toolwirev1.ToolError) {
	if s == nil || te == nil {
		return
	}
	te.Message = s.String(te.Message)
	te.Suggestion = s.String(te.Suggestion)
	te.Violations = s.violations(te.Violations)
}

func (s *Secrets) violations(vs []*toolwirev1.FieldViolation) []*toolwirev1.FieldViolation {
	var out []*toolwirev1.FieldViolation
	for i, v := range vs {
		m := s.String(v.GetMessage())
		if m == v.GetMessage() {
			continue
		}
		if out == nil {
			out = append([]*toolwirev1.FieldViolation(nil), vs...)
		}
		c := proto.Clone(v).(*toolwirev1.FieldViolation)
		c.Message = m
		out[i] = c
	}
	if out == nil {
		return vs
	}
	return out
}

// Contents returns cs with every content block that holds a secret
// replaced by a redacted copy (cs itself when none does).
func (s *Secrets) Contents(cs []*toolwirev1.Content) []*toolwirev1.Content {
	if s == nil {
		return cs
	}
	var out []*toolwirev1.Content
	for i, c := range cs {
		r := s.content(c)
		if r == c {
			continue
		}
		if out == nil {
			out = append([]*toolwirev1.Content(nil), cs...)
		}
		out[i] = r
	}
	if out == nil {
		return cs
	}
	return out
}

// content returns c, or a redacted copy of it when it holds a secret.
func (s *Secrets) content(c *toolwirev1.Content) *toolwirev1.Content {
	texts := []string{c.GetMetaJson(), c.GetText().GetText()}
	if l := c.GetResourceLink(); l != nil {
		texts = append(texts, l.Uri, l.Name, l.Title, l.Description)
	}
	if r := c.GetResource(); r != nil {
		texts = append(texts, r.Uri, r.GetText(), r.MetaJson)
	}
	hit := false
	for _, t := range texts {
		if s.contains(t) {
			hit = true
			break
		}
	}
	if !hit {
		return c
	}
	c = proto.Clone(c).(*toolwirev1.Content)
	c.MetaJson = s.JSON(c.MetaJson)
	switch k := c.Kind.(type) {
	case *toolwirev1.Content_Text:
		k.Text.Text = s.String(k.Text.Text)
	case *toolwirev1.Content_ResourceLink:
		l := k.ResourceLink
		l.Uri, l.Name, l.Title, l.Description = s.String(l.Uri), s.String(l.Name), s.String(l.Title), s.String(l.Description)
	case *toolwirev1.Content_Resource:
		r := k.Resource
		r.Uri, r.MetaJson = s.String(r.Uri), s.JSON(r.MetaJson)
		if t, ok := r.Contents.(*toolwirev1.EmbeddedResource_Text); ok {
			t.Text = s.String(t.Text)
		}
	}
	return c
}

// Response redacts a response's content, structured output, metadata and error.
func (s *Secrets) Response(r *toolwirev1.ToolResponse) {
	if s == nil || r == nil {
		return
	}
	r.Content = s.Contents(r.Content)
	r.StructuredJson = s.JSON(r.StructuredJson)
	r.MetaJson = s.JSON(r.MetaJson)
	s.ToolError(r.Error)
	if m := r.Meta; m != nil {
		m.CancelReason = s.String(m.CancelReason)
	}
	if in := r.InputRequired; in != nil {
		for k, q := range in.Requests {
			if p := s.JSON(q.GetParamsJson()); p != q.GetParamsJson() {
				in.Requests[k] = &toolwirev1.InputRequest{Method: q.GetMethod(), ParamsJson: p}
			}
		}
	}
}

// ErrSecretInState is the error of a tool whose input-required answer
// keeps a secret argument's value in its state, which is stored with the
// response and cannot be redacted (the tool gets it back byte for byte).
var ErrSecretInState = errors.New("the tool's input state holds the value of a secret argument")

// Event redacts an event's message, partial content, error and response.
func (s *Secrets) Event(ev *toolwirev1.CallEvent) {
	if s == nil || ev == nil {
		return
	}
	ev.Message = s.String(ev.Message)
	ev.Partial = s.Contents(ev.Partial)
	s.ToolError(ev.Error)
	s.Response(ev.Response)
}

// DeadLetter redacts a dead letter's reason and last error. Its call (the
// arguments a retry runs with) is left as stored.
func (s *Secrets) DeadLetter(dl *toolwirev1.DeadLetter) {
	if s == nil || dl == nil {
		return
	}
	dl.Reason = s.String(dl.Reason)
	s.ToolError(dl.LastError)
}

// Result returns res, or a redacted copy when its content, structured
// output or metadata holds a secret. Intents are kept.
func (s *Secrets) Result(res *tool.Result) *tool.Result {
	if s == nil || res == nil {
		return res
	}
	content := s.Contents(res.Content)
	structured := s.JSONBytes(res.Structured)
	meta := s.JSONBytes(res.Meta)
	if sameSlice(content, res.Content) && sameBytes(structured, res.Structured) && sameBytes(meta, res.Meta) {
		return res
	}
	c := *res
	c.Content, c.Structured, c.Meta = content, structured, meta
	return &c
}

// Input returns in with the params of every request that holds a secret
// redacted (in itself when none does), or ErrSecretInState.
func (s *Secrets) Input(in *tool.Input) (*tool.Input, error) {
	if s == nil || in == nil {
		return in, nil
	}
	if st := string(in.State); s.String(st) != st {
		return nil, ErrSecretInState
	}
	var out *tool.Input
	for k, q := range in.Requests {
		p := s.JSONBytes(q.Params)
		if sameBytes(p, q.Params) {
			continue
		}
		if out == nil {
			out = &tool.Input{State: in.State, Requests: make(map[string]tool.InputRequest, len(in.Requests))}
			for k2, q2 := range in.Requests {
				out.Requests[k2] = q2
			}
		}
		out.Requests[k] = tool.InputRequest{Method: q.Method, Params: p}
	}
	if out == nil {
		return in, nil
	}
	return out, nil
}

// JSONBytes is JSON for bytes; b itself is returned when it holds no
// secret.
func (s *Secrets) JSONBytes(b []byte) []byte {
	if s == nil || len(b) == 0 {
		return b
	}
	x := string(b)
	if r := s.JSON(x); r != x {
		return []byte(r)
	}
	return b
}

func sameSlice(a, b []*toolwirev1.Content) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Err returns err with its text redacted: a *tool.Error in its chain
// becomes a redacted copy (message, suggestion, violations, content,
// structured output, metadata; its cause is kept for errors.Is and errors.As, and is
// never shown to callers), found first by errors.As; an error whose text
// holds a secret is wrapped so that Error() is redacted while errors.Is
// and errors.As still see the original. err itself is returned when
// nothing changes.
func (s *Secrets) Err(err error) error {
	if s == nil || err == nil {
		return err
	}
	msg := err.Error()
	red := s.String(msg)
	var te *tool.Error
	if !errors.As(err, &te) {
		if red == msg {
			return err
		}
		return &redactedError{msg: red, errs: []error{err}}
	}
	c := *te
	c.Message, c.Suggestion = s.String(te.Message), s.String(te.Suggestion)
	c.Violations = s.violations(te.Violations)
	c.Content = s.Contents(te.Content)
	c.Structured = s.JSONBytes(te.Structured)
	c.Meta = s.JSONBytes(te.Meta)
	same := c.Message == te.Message && c.Suggestion == te.Suggestion && sameViolations(c.Violations, te.Violations) &&
		sameSlice(c.Content, te.Content) && sameBytes(c.Structured, te.Structured) && sameBytes(c.Meta, te.Meta)
	switch {
	case same && red == msg:
		return err
	case err == error(te):
		return &c
	}
	return &redactedError{msg: red, errs: []error{&c, err}}
}

func sameViolations(a, b []*toolwirev1.FieldViolation) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// redactedError shows a redacted text for errs, which errors.Is and
// errors.As search in order.
type redactedError struct {
	msg  string
	errs []error
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.errs }
