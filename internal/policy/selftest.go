package policy

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ErrTestsFailed is matched (errors.Is) by every *TestsError.
var ErrTestsFailed = errors.New("policy: the document's tests fail")

// TestFailure is one test of a document whose outcome was not the one
// it expects.
type TestFailure struct {
	Index  int    // in the document's tests list
	Name   string // the test's name; "" when it has none
	Line   int
	Tool   string
	Expect Effect
	Got    Effect
	// Because says what decided the outcome it got (Explanation.because).
	Because string
}

// String renders "line 40: tests[3] "etc is off limits": fs_read:
// expected deny, got allow (because ...)".
func (f TestFailure) String() string {
	name := fmt.Sprintf("tests[%d]", f.Index)
	if f.Name != "" {
		name += fmt.Sprintf(" %q", f.Name)
	}
	return fmt.Sprintf("line %d: %s: %s: expected %s, got %s (%s)", f.Line, name, f.Tool, f.Expect, f.Got, f.Because)
}

// TestsError is the error of RunTests: the tests that failed.
type TestsError struct {
	Failures []TestFailure
	Total    int
}

// Error names every failed test (at most 20).
func (e *TestsError) Error() string {
	parts := make([]string, 0, min(len(e.Failures), maxProblemsShown)+1)
	for i, f := range e.Failures {
		if i == maxProblemsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Failures)-i))
			break
		}
		parts = append(parts, f.String())
	}
	return fmt.Sprintf("policy: %d of %d tests fail: %s", len(e.Failures), e.Total, strings.Join(parts, "; "))
}

// Is reports whether target is ErrTestsFailed.
func (e *TestsError) Is(target error) bool { return target == ErrTestsFailed }

// ToolLookup returns the spec of a tool by name, nil when it is unknown.
type ToolLookup func(name string) *toolwirev1.ToolSpec

// RunTests decides every test of the document (`tests:`) and returns a
// *TestsError naming each whose outcome differs from its `expect`, nil
// when all pass (or there are none). An apply must refuse a document
// whose tests fail.
//
// A test's tool spec is lookup's (the registry's) when lookup is given
// and knows the tool, else a bare spec with only the name (no
// annotations: MCP's defaults, so destructive and open-world); the
// test's own requires_approval and annotations override either. Tests
// run with no grants and no approval, at a fixed time. A test whose
// caller names no mode runs in the document's sessions.default_mode, if
// any, as admission decides such a call.
func (p *Policy) RunTests(lookup ToolLookup) error {
	if p == nil || len(p.tests) == 0 {
		return nil
	}
	te := &TestsError{Total: len(p.tests)}
	for i := range p.tests {
		t := &p.tests[i]
		in := Input{Tool: t.spec(lookup), Caller: t.caller, Now: testTime}
		if m := p.sessions.DefaultMode; m != "" && t.caller.GetMode() == "" {
			// As admission decides it: in the default mode.
			in.Caller = proto.CloneOf(cmp.Or(t.caller, &toolwirev1.Caller{}))
			in.Caller.Mode = m
		}
		if mo := in.Caller.GetModel(); mo != "" && in.Caller.GetModelFamily() == "" {
			// As admission derives it (toolsets.go).
			in.Caller = proto.CloneOf(in.Caller)
			in.Caller.ModelFamily = p.ModelFamily(mo)
		}
		if t.args != nil {
			args, err := ParseArgs(t.args)
			if err != nil { // Parse checked them
				return fmt.Errorf("policy: %s: args: %w", t.field, err)
			}
			in.Args = args
		}
		x := Explanation{Decision: p.Decide(in)}
		if got := x.Decision.Outcome; got != t.expect {
			te.Failures = append(te.Failures, TestFailure{
				Index: i, Name: t.name, Line: t.line, Tool: t.tool,
				Expect: t.expect, Got: got, Because: x.because(),
			})
		}
	}
	if len(te.Failures) > 0 {
		return te
	}
	return nil
}

// testTime is the time tests decide at: fixed, so a test's outcome does
// not depend on when the apply runs.
var testTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// spec builds the tool spec a test decides with.
func (t *docTest) spec(lookup ToolLookup) *toolwirev1.ToolSpec {
	var spec *toolwirev1.ToolSpec
	if lookup != nil {
		if s := lookup(t.tool); s != nil {
			spec = proto.CloneOf(s)
		}
	}
	if spec == nil {
		spec = &toolwirev1.ToolSpec{Name: t.tool}
	}
	if t.requiresApproval != nil {
		spec.RequiresApproval = *t.requiresApproval
	}
	if a := t.annotations; a != nil {
		if spec.Annotations == nil {
			spec.Annotations = &toolwirev1.ToolAnnotations{}
		}
		for _, f := range [...]struct {
			dst **bool
			src *bool
		}{
			{&spec.Annotations.ReadOnly, a.ReadOnly}, {&spec.Annotations.Destructive, a.Destructive},
			{&spec.Annotations.Idempotent, a.Idempotent}, {&spec.Annotations.OpenWorld, a.OpenWorld},
		} {
			if f.src != nil {
				*f.dst = proto.Bool(*f.src)
			}
		}
	}
	return spec
}
