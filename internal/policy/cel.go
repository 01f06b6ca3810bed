package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// CostLimit bounds the evaluation of one `when` condition, in CEL's cost
// units (about one per operation, more for string and list work that
// grows with its input). Evaluation stops when it is reached; the rule is
// then treated fail closed (see doc.go). It is a constant, not a setting,
// so every dispatcher replica reaches the same decision.
const CostLimit = 20_000

// MaxWhenBytes bounds the text of one `when` condition.
const MaxWhenBytes = 4096

// celTool is the CEL variable `tool`: what a condition may know about the
// tool called.
type celTool struct {
	Name        string         `cel:"name"`
	Version     string         `cel:"version"`
	Category    string         `cel:"category"`
	Executor    string         `cel:"executor"`
	Provider    string         `cel:"provider"`
	Scopes      []string       `cel:"scopes"`
	Annotations celAnnotations `cel:"annotations"`
}

// celAnnotations are the tool's behaviour hints resolved with MCP's
// defaults (an unset destructive is true, an unset open_world is true; a
// read-only tool is never destructive), plus requires_approval.
type celAnnotations struct {
	ReadOnly         bool `cel:"read_only"`
	Destructive      bool `cel:"destructive"`
	Idempotent       bool `cel:"idempotent"`
	OpenWorld        bool `cel:"open_world"`
	RequiresApproval bool `cel:"requires_approval"`
}

func newCELTool(spec *toolwirev1.ToolSpec) *celTool {
	a := spec.GetAnnotations()
	readOnly := a.GetReadOnly()
	destructive := !readOnly && (a == nil || a.Destructive == nil || a.GetDestructive())
	openWorld := a == nil || a.OpenWorld == nil || a.GetOpenWorld()
	return &celTool{
		Name:     spec.GetName(),
		Version:  spec.GetVersion(),
		Category: enumWord(spec.GetCategory().String(), "TOOL_CATEGORY_"),
		Executor: enumWord(spec.GetExecutor().String(), "EXECUTOR_TYPE_"),
		Provider: spec.GetProvider(),
		Scopes:   spec.GetScopes(),
		Annotations: celAnnotations{
			ReadOnly: readOnly, Destructive: destructive, Idempotent: a.GetIdempotent(),
			OpenWorld: openWorld, RequiresApproval: spec.GetRequiresApproval(),
		},
	}
}

// enumWord turns "TOOL_CATEGORY_RETRIEVAL" into "retrieval" and the
// UNSPECIFIED value into "".
func enumWord(s, prefix string) string {
	s = strings.TrimPrefix(s, prefix)
	if s == "UNSPECIFIED" {
		return ""
	}
	return strings.ToLower(s)
}

// celEnv is the one CEL environment of every policy: built once per
// process, identical on every replica.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Types(&toolwirev1.Caller{}),
		ext.NativeTypes(reflect.TypeFor[celTool](), ext.ParseStructTags(true)),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("caller", cel.ObjectType("toolwire.v1.Caller")),
		cel.Variable("tool", cel.ObjectType("policy.celTool")),
		ext.Strings(),
		ext.Sets(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.ParserExpressionSizeLimit(MaxWhenBytes),
	)
})

// celProblem is a CEL compile error with its line and column within the
// expression (1-based line, 0-based column; 0 when unknown).
type celProblem struct {
	line, col int
	msg       string
}

// compileWhen compiles and type-checks a condition, which must be a bool.
func compileWhen(src string) (cel.Program, []celProblem) {
	env, err := celEnv()
	if err != nil {
		return nil, []celProblem{{msg: "CEL environment: " + err.Error()}}
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		var ps []celProblem
		for _, e := range iss.Errors() {
			p := celProblem{msg: e.Message}
			if loc := e.Location; loc != nil {
				p.line, p.col = loc.Line(), loc.Column()
			}
			ps = append(ps, p)
		}
		if len(ps) == 0 {
			ps = append(ps, celProblem{msg: iss.Err().Error()})
		}
		return nil, ps
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return nil, []celProblem{{line: 1, msg: fmt.Sprintf("must be a bool, not %s (compare a dynamic value, e.g. args.force == true)", ast.OutputType())}}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, []celProblem{{msg: err.Error()}}
	}
	return prg, nil
}

// errCostLimit marks a condition stopped by CostLimit.
var errCostLimit = errors.New("cost limit exceeded")

// evalWhen runs a condition: its value, or an error (errCostLimit when
// the cost limit stopped it).
func evalWhen(prg cel.Program, act interpreter.Activation) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		if strings.Contains(err.Error(), "cost limit exceeded") {
			return false, fmt.Errorf("%w (limit %d)", errCostLimit, CostLimit)
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("condition gave %s, not a bool", out.Type())
	}
	return bool(b), nil
}

// activation resolves the CEL variables of one decision, converting each
// to a CEL value once, on first use.
type activation struct {
	argsIn   *Args
	callerIn *toolwirev1.Caller
	toolIn   *toolwirev1.ToolSpec

	args, caller, tool ref.Val
}

var emptyCaller = &toolwirev1.Caller{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if a.args == nil {
			a.args = types.DefaultTypeAdapter.NativeToValue(a.argsIn.Value())
		}
		return a.args, true
	case "caller":
		if a.caller == nil {
			c := a.callerIn
			if c == nil {
				c = emptyCaller
			}
			a.caller = celAdapter().NativeToValue(c)
		}
		return a.caller, true
	case "tool":
		if a.tool == nil {
			a.tool = celAdapter().NativeToValue(newCELTool(a.toolIn))
		}
		return a.tool, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// celAdapter returns the environment's type adapter (it knows the Caller
// message and celTool). Only called once a policy compiled against the
// environment, so the environment exists.
func celAdapter() types.Adapter {
	env, err := celEnv()
	if err != nil {
		return types.DefaultTypeAdapter
	}
	return env.CELTypeAdapter()
}
