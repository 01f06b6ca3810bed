package specfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxSummaryLines is the longest summary a spec file may give.
const MaxSummaryLines = 4

// DefaultProvider is the provider of file specs that name none.
const DefaultProvider = "local"

// Options configure loading.
type Options struct {
	// Vars are the values of ${NAME} references.
	Vars map[string]string
	// Lookup, if set, gives values of names Vars lacks (os.LookupEnv).
	Lookup func(name string) (string, bool)
}

// Check validates one executor type's config of a spec.
type Check func(spec *toolwirev1.ToolSpec) error

var (
	checksMu sync.RWMutex
	checks   = map[toolwirev1.ExecutorType]Check{}
)

// RegisterCheck makes Load run check on every spec of executor type t.
// Executor packages register theirs from the worker's configuration code.
func RegisterCheck(t toolwirev1.ExecutorType, check Check) {
	checksMu.Lock()
	defer checksMu.Unlock()
	checks[t] = check
}

// LoadDir loads every *.yaml, *.yml and *.json file of dir in fsys, in
// name order, and returns all problems at once.
func LoadDir(fsys fs.FS, dir string, o Options) ([]*toolwirev1.ToolSpec, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("specfile: %w", err)
	}
	var specs []*toolwirev1.ToolSpec
	var errs []error
	names := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !isSpecFile(e.Name()) {
			continue
		}
		p := path.Join(dir, e.Name())
		spec, err := Load(fsys, p, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := names[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("specfile: %s: tool %q is also declared in %s", p, spec.Name, prev))
			continue
		}
		names[spec.Name] = p
		specs = append(specs, spec)
	}
	return specs, errors.Join(errs...)
}

func isSpecFile(name string) bool {
	return slices.Contains([]string{".yaml", ".yml", ".json"}, path.Ext(name))
}

// Load reads and checks one spec file.
func Load(fsys fs.FS, name string, o Options) (*toolwirev1.ToolSpec, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("specfile: %w", err)
	}
	spec, err := Parse(b, o)
	if err != nil {
		return nil, fmt.Errorf("specfile: %s: %w", name, err)
	}
	return spec, nil
}

// Parse decodes and checks one spec document.
func Parse(b []byte, o Options) (*toolwirev1.ToolSpec, error) {
	v, err := decodeYAML(b)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a YAML mapping")
	}
	if err := expand(doc, o.lookup); err != nil {
		return nil, err
	}
	for _, f := range []string{"input_schema", "output_schema"} {
		v, ok := doc[f]
		if !ok {
			continue
		}
		if _, isObj := v.(map[string]any); !isObj {
			return nil, fmt.Errorf("%s: want a mapping (a JSON Schema object)", f)
		}
		s, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		delete(doc, f)
		doc[f+"_json"] = string(s)
	}
	if defs, ok := doc["definitions"].([]any); ok {
		for i, d := range defs {
			m, ok := d.(map[string]any)
			if !ok {
				continue // protojson names it
			}
			if v, ok := m["input_schema"]; ok {
				if _, isObj := v.(map[string]any); !isObj {
					return nil, fmt.Errorf("definitions[%d].input_schema: want a mapping (a JSON Schema object)", i)
				}
				s, err := json.Marshal(v)
				if err != nil {
					return nil, fmt.Errorf("definitions[%d].input_schema: %w", i, err)
				}
				delete(m, "input_schema")
				m["input_schema_json"] = string(s)
			}
		}
	}
	if err := shortEnum(doc, "executor", "EXECUTOR_TYPE_", toolwirev1.ExecutorType_value); err != nil {
		return nil, err
	}
	if err := shortEnum(doc, "category", "TOOL_CATEGORY_", toolwirev1.ToolCategory_value); err != nil {
		return nil, err
	}
	if lim, ok := doc["limits"].(map[string]any); ok {
		if err := shortEnum(lim, "truncate", "TRUNCATE_DIRECTION_", toolwirev1.TruncateDirection_value); err != nil {
			return nil, fmt.Errorf("limits: %w", err)
		}
	}
	if sb, ok := doc["sandbox"].(map[string]any); ok {
		if codes, ok := sb["exit_codes"].(map[string]any); ok {
			for k := range codes {
				if err := shortEnum(codes, k, "ERROR_TYPE_", toolwirev1.ErrorType_value); err != nil {
					return nil, fmt.Errorf("sandbox.exit_codes: %w", err)
				}
			}
		}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("not a tool spec: %w", err)
	}
	spec := &toolwirev1.ToolSpec{}
	if err := protojson.Unmarshal(js, spec); err != nil {
		return nil, fmt.Errorf("not a tool spec: %w", err)
	}
	if spec.Version != "" || spec.Disabled || spec.DisabledReason != "" {
		return nil, errors.New("version and disabled are set by the registry, not by a spec file")
	}
	if spec.Provider == "" {
		spec.Provider = DefaultProvider
	}
	if err := checkDocs(spec); err != nil {
		return nil, err
	}
	if err := registry.Check(spec); err != nil {
		return nil, err
	}
	checksMu.RLock()
	check := checks[spec.Executor]
	checksMu.RUnlock()
	if check != nil {
		if err := check(spec); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func checkDocs(spec *toolwirev1.ToolSpec) error {
	summary := strings.TrimSpace(spec.Summary)
	switch n := strings.Count(summary, "\n") + 1; {
	case summary == "":
		return errors.New("summary is required: 2 to 4 lines telling an agent what the tool is for")
	case n > MaxSummaryLines:
		return fmt.Errorf("summary has %d lines; keep it to %d and move the rest to doc", n, MaxSummaryLines)
	}
	if strings.TrimSpace(spec.Doc) == "" {
		return errors.New("doc is required: the tool's full documentation")
	}
	spec.Summary = summary
	if spec.Description == "" {
		spec.Description = summary
	}
	return nil
}

func shortEnum(doc map[string]any, field, prefix string, values map[string]int32) error {
	s, ok := doc[field].(string)
	if !ok {
		return nil
	}
	full := strings.ToUpper(s)
	if !strings.HasPrefix(full, prefix) {
		full = prefix + full
	}
	if v, ok := values[full]; !ok || v == 0 {
		return fmt.Errorf("%s: unknown value %q", field, s)
	}
	doc[field] = full
	return nil
}

var varRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (o Options) lookup(name string) (string, bool) {
	if v, ok := o.Vars[name]; ok {
		return v, true
	}
	if o.Lookup != nil {
		return o.Lookup(name)
	}
	return "", false
}

// expand replaces ${NAME} in every string of v.
func expand(v any, lookup func(string) (string, bool)) error {
	var errs []error
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return varRe.ReplaceAllStringFunc(x, func(m string) string {
				name := varRe.FindStringSubmatch(m)[1]
				val, ok := lookup(name)
				if !ok {
					errs = append(errs, fmt.Errorf("unknown variable ${%s}", name))
				}
				return val
			})
		}
		return v
	}
	walk(v)
	return errors.Join(errs...)
}
