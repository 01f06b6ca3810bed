package registry

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/toolwire/toolwire/internal/jsonvalue"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schemas compiles JSON Schemas (draft 2020-12) once per schema text and
// caches them by hash. Remote references are never fetched. Safe for
// concurrent use.
type Schemas struct {
	mu    sync.RWMutex
	cache map[[32]byte]*jsonschema.Schema
}

// DefaultSchemas is the process-wide cache.
var DefaultSchemas = &Schemas{}

// Compile returns the compiled schema of text. Empty text means "any JSON
// object".
func (s *Schemas) Compile(text string) (*jsonschema.Schema, error) {
	if strings.TrimSpace(text) == "" {
		text = `{"type":"object"}`
	}
	key := sha256.Sum256([]byte(text))
	s.mu.RLock()
	sch, ok := s.cache[key]
	s.mu.RUnlock()
	if ok {
		return sch, nil
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	sch, err = c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s.mu.Lock()
	if s.cache == nil {
		s.cache = make(map[[32]byte]*jsonschema.Schema)
	}
	s.cache[key] = sch
	s.mu.Unlock()
	return sch, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("remote schema references are not loaded: %s", url)
}

var printer = sync.OnceValue(func() *message.Printer { return message.NewPrinter(language.English) })

// ValidateArgs checks the JSON arguments against sch. It returns nil or the
// field-level violations, sorted by field; a text the one JSON reader
// (jsonvalue.Parse) refuses is one violation (ParseViolation).
func ValidateArgs(sch *jsonschema.Schema, args []byte) []*toolwirev1.FieldViolation {
	doc, err := jsonvalue.Parse(args)
	if err != nil {
		return []*toolwirev1.FieldViolation{ParseViolation(err)}
	}
	return validateDoc(sch, doc)
}

// ValidateOutput checks a tool's structured output (JSON) against its
// output schema sch, as ValidateArgs checks arguments: nil or the
// violations, sorted by field; a text that is not JSON is one violation
// at the root.
func ValidateOutput(sch *jsonschema.Schema, out []byte) []*toolwirev1.FieldViolation {
	doc, err := jsonvalue.Parse(out)
	if err != nil {
		v := ParseViolation(err)
		v.Message = strings.Replace(v.Message, "arguments are", "structured output is", 1)
		return []*toolwirev1.FieldViolation{v}
	}
	return validateDoc(sch, doc)
}

// ParseViolation is the violation of arguments jsonvalue.Parse refused
// with err: an object that repeats a key (at any level) is a violation at
// the repeated member, naming the key; a text that is not JSON, and one
// that breaks another of the reader's rules (an invalid string, a number
// out of range, nesting too deep), a violation at the root.
func ParseViolation(err error) *toolwirev1.FieldViolation {
	var dup *jsonvalue.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		return &toolwirev1.FieldViolation{Field: dup.Pointer, Message: fmt.Sprintf("duplicate key %q", dup.Key)}
	case errors.Is(err, jsonvalue.ErrSyntax):
		return &toolwirev1.FieldViolation{Field: "", Message: "arguments are not valid JSON: " + err.Error()}
	}
	return &toolwirev1.FieldViolation{Field: "", Message: "arguments are refused: " + err.Error()}
}

// validateDoc checks the schema form of doc against sch (ValidateArgs).
func validateDoc(sch *jsonschema.Schema, doc *jsonvalue.Doc) []*toolwirev1.FieldViolation {
	err := sch.Validate(doc.Schema())
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []*toolwirev1.FieldViolation{{Field: "", Message: err.Error()}}
	}
	var out []*toolwirev1.FieldViolation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := pointer(e.InstanceLocation)
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
			for _, m := range req.Missing {
				out = append(out, &toolwirev1.FieldViolation{Field: field + "/" + escape(m), Message: "is required"})
			}
			return
		}
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(ap.Properties) > 0 {
			for _, p := range ap.Properties {
				out = append(out, &toolwirev1.FieldViolation{Field: field + "/" + escape(p), Message: "is not allowed"})
			}
			return
		}
		out = append(out, &toolwirev1.FieldViolation{Field: field, Message: e.ErrorKind.LocalizedString(printer())})
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteByte('/')
		b.WriteString(escape(p))
	}
	return b.String()
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
