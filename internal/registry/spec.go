package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/toolwire/toolwire/internal/skills"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// NameRe is the rule every tool name follows: the LLM providers'
// function-name rule.
var NameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Version returns the content hash of spec, ignoring its version and
// disabled fields.
func Version(spec *toolwirev1.ToolSpec) string {
	c := proto.Clone(spec).(*toolwirev1.ToolSpec)
	c.Version, c.Disabled, c.DisabledReason = "", false, ""
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		// A ToolSpec always marshals; keep the hash total anyway.
		b = []byte(c.String())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Check validates spec: its name, that its executor config matches its
// executor type, that its schemas compile, what it says of skills
// (skills.CheckSpec), and its definitions (checkDefinitions). It returns
// every problem.
func Check(spec *toolwirev1.ToolSpec) error {
	var errs []error
	if !NameRe.MatchString(spec.GetName()) {
		errs = append(errs, fmt.Errorf("name %q must match %s", spec.GetName(), NameRe))
	}
	want := map[toolwirev1.ExecutorType]bool{
		toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE:  spec.GetNative() != nil,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP:     spec.GetMcp() != nil,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_SANDBOX: spec.GetSandbox() != nil,
		toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP:    spec.GetHttp() != nil,
	}
	if has, ok := want[spec.GetExecutor()]; !ok {
		errs = append(errs, fmt.Errorf("executor %s is not an executor type", spec.GetExecutor()))
	} else if !has {
		errs = append(errs, fmt.Errorf("executor %s needs its config", spec.GetExecutor()))
	}
	if spec.GetProvider() == "" {
		errs = append(errs, errors.New("provider is empty (use \"builtin\" for native tools)"))
	}
	if _, err := DefaultSchemas.Compile(spec.GetInputSchemaJson()); err != nil {
		errs = append(errs, fmt.Errorf("input schema: %w", err))
	}
	if s := spec.GetOutputSchemaJson(); s != "" {
		if _, err := DefaultSchemas.Compile(s); err != nil {
			errs = append(errs, fmt.Errorf("output schema: %w", err))
		}
	}
	if u := spec.GetUiTemplate(); u != "" && (len(u) > 2048 || !uiTemplateRe.MatchString(u)) {
		errs = append(errs, fmt.Errorf("ui_template %.64q must be a ui:// URI of at most 2048 printable ASCII characters", u))
	}
	if err := skills.CheckSpec(spec); err != nil {
		// A worker's manifests are checked, never believed, and only the
		// native `skill` tool carries them (internal/skills).
		errs = append(errs, err)
	}
	if err := checkDefinitions(spec); err != nil {
		errs = append(errs, err)
	}
	if metaWritesTemplate(spec.GetMetaJson()) {
		// A client's keys are the profile's to write (internal/profiles):
		// the widget template comes from ui_template, which is checked.
		errs = append(errs, fmt.Errorf("meta_json: %q is generated from ui_template; a tool does not write it", metaOpenAIOutputTemplate))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registry: tool %q: %w", spec.GetName(), err)
	}
	return nil
}

// metaOpenAIOutputTemplate is ChatGPT's key of a tool's widget template
// (profiles.MetaOpenAIOutputTemplate).
const metaOpenAIOutputTemplate = "openai/outputTemplate"

// metaWritesTemplate reports whether a spec's meta_json (an object, when
// valid) has the key metaOpenAIOutputTemplate.
func metaWritesTemplate(metaJSON string) bool {
	if metaJSON == "" {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(metaJSON), &m) != nil {
		return false
	}
	_, ok := m[metaOpenAIOutputTemplate]
	return ok
}

// uiTemplateRe is what a spec's ui_template may be: a ui:// URI (the MCP
// resource of the tool's widget), printable ASCII without spaces, bounded.
var uiTemplateRe = regexp.MustCompile(`^ui://[!-~]+$`)

// Stamp returns a copy of spec with its version set.
func Stamp(spec *toolwirev1.ToolSpec) *toolwirev1.ToolSpec {
	c := proto.Clone(spec).(*toolwirev1.ToolSpec)
	c.Version = Version(c)
	return c
}
