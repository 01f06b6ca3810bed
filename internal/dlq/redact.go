package dlq

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Shown returns a copy of l's record fit to print, redacted as audits
// redact (internal/redact): the call's arguments with the fields its spec
// version's input schema marks secret replaced by "[REDACTED]", and their
// values replaced in the reason and the last error. When the schema
// cannot be known (the version left the registry, or the registry cannot
// be read) the arguments are replaced whole and every argument value
// counts as secret. The raw bytes of an undecodable call are withheld
// (they may hold a call's arguments): rawWithheld is their length. l
// itself is not changed; Retry still uses the stored call.
func (q *Queue) Shown(ctx context.Context, l *Letter) (dl *toolwirev1.DeadLetter, rawWithheld int) {
	dl = proto.Clone(l.Record).(*toolwirev1.DeadLetter)
	if n := len(dl.Raw); n > 0 {
		dl.Raw, rawWithheld = nil, n
	}
	call := dl.GetCall()
	if call == nil {
		return dl, rawWithheld
	}
	var sec *redact.Secrets
	if schema, ok := q.schemaOf(ctx, call.Tool, call.SpecVersion); ok {
		plan := redact.Compile(schema)
		sec = plan.Secrets(call.Arguments)
		call.Arguments = plan.Arguments(call.Arguments)
	} else {
		sec = redact.AllOf(call.Arguments)
		call.Arguments = []byte(`"` + redact.Redacted + `"`)
	}
	sec.DeadLetter(dl)
	return dl, rawWithheld
}

// schemas caches the input schemas of spec versions read by Shown.
type schemas struct {
	mu sync.Mutex
	m  map[string]string // name@version -> input schema
}

// schemaOf returns the input schema of a spec version, and false when it
// cannot be known. Only found schemas are cached.
func (q *Queue) schemaOf(ctx context.Context, name, version string) (string, bool) {
	if q.registry == nil || version == "" {
		return "", false
	}
	key := name + "@" + version
	q.schemas.mu.Lock()
	sch, ok := q.schemas.m[key]
	q.schemas.mu.Unlock()
	if ok {
		return sch, true
	}
	e, err := q.registry.Get(ctx, registry.VersionKey(name, version))
	if err != nil {
		return "", false
	}
	spec := &toolwirev1.ToolSpec{}
	if proto.Unmarshal(e.Value(), spec) != nil {
		return "", false
	}
	q.schemas.mu.Lock()
	if q.schemas.m == nil {
		q.schemas.m = map[string]string{}
	}
	q.schemas.m[key] = spec.InputSchemaJson
	q.schemas.mu.Unlock()
	return spec.InputSchemaJson, true
}
