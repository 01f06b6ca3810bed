package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
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

// MaxWhenDepth bounds how deep a `when` condition nests (parentheses,
// lists, maps, calls): at this depth the slowest construct found (nested
// map literals) compiles in a few milliseconds.
const MaxWhenDepth = 32

// The CEL types of the variables `caller` and `tool` (and of
// tool.annotations). They are objects with fixed fields, so a condition
// naming a field that does not exist does not compile.
const (
	celCallerType      = "toolwire.Caller"
	celToolType        = "toolwire.Tool"
	celAnnotationsType = "toolwire.ToolAnnotations"
)

// celTool is what a condition may know about the tool called.
type celTool struct {
	name, version, category, executor, provider string
	scopes                                      []string
	annotations                                 celAnnotations
}

// celAnnotations are the tool's behaviour hints resolved with MCP's
// defaults (an unset destructive is true, an unset open_world is true; a
// read-only tool is never destructive), plus requires_approval.
type celAnnotations struct {
	readOnly, destructive, idempotent, openWorld, requiresApproval bool
}

func newCELTool(spec *toolwirev1.ToolSpec) *celTool {
	a := spec.GetAnnotations()
	readOnly := a.GetReadOnly()
	return &celTool{
		name:     spec.GetName(),
		version:  spec.GetVersion(),
		category: enumWord(spec.GetCategory().String(), "TOOL_CATEGORY_"),
		executor: enumWord(spec.GetExecutor().String(), "EXECUTOR_TYPE_"),
		provider: spec.GetProvider(),
		scopes:   spec.GetScopes(),
		annotations: celAnnotations{
			readOnly:         readOnly,
			destructive:      !readOnly && (a == nil || a.Destructive == nil || a.GetDestructive()),
			idempotent:       a.GetIdempotent(),
			openWorld:        a == nil || a.OpenWorld == nil || a.GetOpenWorld(),
			requiresApproval: spec.GetRequiresApproval(),
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

// celField is one field of our object types: its CEL type and how to read
// it from the Go value behind the object.
type celField struct {
	typ *types.Type
	get func(obj any) any
}

var stringList = types.NewListType(types.StringType)

// celObjects are the fields of each object type. Reading a field converts
// only that field (no reflection).
var celObjects = map[string]map[string]celField{
	celCallerType: {
		"tenant":  {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetTenant()) }},
		"agent":   {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetAgent()) }},
		"session": {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetSession()) }},
		"user":    {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetUser()) }},
		"run":     {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetRun()) }},
		"turn":    {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetTurn()) }},
		"mode":    {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetMode()) }},
		// The model the call is made for and its family (toolsets.go): a
		// claim of the agent service, "" when not given.
		"model":        {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetModel()) }},
		"model_family": {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetModelFamily()) }},
		// The delegation chain (docs/delegation.md): the parent call's
		// tool, its id, the chain's first call and the depth (0 = none).
		"parent":         {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetParentTool()) }},
		"parent_call_id": {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetParentCallId()) }},
		"root_call_id":   {types.StringType, func(o any) any { return types.String(o.(*toolwirev1.Caller).GetRootCallId()) }},
		"depth":          {types.IntType, func(o any) any { return types.Int(o.(*toolwirev1.Caller).GetDepth()) }},
		"scopes": {stringList, func(o any) any {
			return types.NewStringList(types.DefaultTypeAdapter, o.(*toolwirev1.Caller).GetScopes())
		}},
	},
	celToolType: {
		"name":     {types.StringType, func(o any) any { return types.String(o.(*celTool).name) }},
		"version":  {types.StringType, func(o any) any { return types.String(o.(*celTool).version) }},
		"category": {types.StringType, func(o any) any { return types.String(o.(*celTool).category) }},
		"executor": {types.StringType, func(o any) any { return types.String(o.(*celTool).executor) }},
		"provider": {types.StringType, func(o any) any { return types.String(o.(*celTool).provider) }},
		"scopes": {stringList, func(o any) any {
			return types.NewStringList(types.DefaultTypeAdapter, o.(*celTool).scopes)
		}},
		"annotations": {types.NewObjectType(celAnnotationsType), func(o any) any {
			return &celObject{typ: annotationsType, v: &o.(*celTool).annotations}
		}},
	},
	celAnnotationsType: {
		"read_only":         {types.BoolType, func(o any) any { return types.Bool(o.(*celAnnotations).readOnly) }},
		"destructive":       {types.BoolType, func(o any) any { return types.Bool(o.(*celAnnotations).destructive) }},
		"idempotent":        {types.BoolType, func(o any) any { return types.Bool(o.(*celAnnotations).idempotent) }},
		"open_world":        {types.BoolType, func(o any) any { return types.Bool(o.(*celAnnotations).openWorld) }},
		"requires_approval": {types.BoolType, func(o any) any { return types.Bool(o.(*celAnnotations).requiresApproval) }},
	},
}

var (
	callerType      = types.NewObjectType(celCallerType)
	toolType        = types.NewObjectType(celToolType)
	annotationsType = types.NewObjectType(celAnnotationsType)
)

// celObject is a CEL value of one of our object types; v is the Go value
// its fields are read from.
type celObject struct {
	typ *types.Type
	v   any
}

func (o *celObject) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("%s cannot be converted", o.typ.TypeName())
}

func (o *celObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return o.typ
	}
	return types.NewErr("%s cannot be converted to %s", o.typ.TypeName(), t.TypeName())
}

func (o *celObject) Equal(other ref.Val) ref.Val {
	x, ok := other.(*celObject)
	return types.Bool(ok && x.v == o.v)
}

func (o *celObject) Type() ref.Type { return o.typ }
func (o *celObject) Value() any     { return o.v }

// celProvider adds our object types to the environment's type provider.
type celProvider struct{ types.Provider }

func (p celProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := celObjects[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Provider.FindStructType(name)
}

func (p celProvider) FindStructFieldNames(name string) ([]string, bool) {
	fs, ok := celObjects[name]
	if !ok {
		return p.Provider.FindStructFieldNames(name)
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	return names, true
}

func (p celProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	fs, ok := celObjects[name]
	if !ok {
		return p.Provider.FindStructFieldType(name, field)
	}
	f, ok := fs[field]
	if !ok {
		return nil, false
	}
	return &types.FieldType{
		Type:    f.typ,
		IsSet:   func(any) bool { return true },
		GetFrom: func(obj any) (any, error) { return f.get(obj), nil },
	}, true
}

func (p celProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := celObjects[name]; ok {
		return types.NewErr("%s values cannot be built in a condition", name)
	}
	return p.Provider.NewValue(name, fields)
}

// celEnv is the one CEL environment of every policy: built once per
// process, identical on every replica.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		func(e *cel.Env) (*cel.Env, error) {
			return cel.CustomTypeProvider(celProvider{e.CELTypeProvider()})(e)
		},
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("caller", callerType),
		cel.Variable("tool", toolType),
		ext.Strings(),
		ext.Sets(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.ParserExpressionSizeLimit(MaxWhenBytes),
		// Nesting bounds compile time: type-checking nested literals grows
		// faster than their depth (200 nested maps took 2 s, so a document
		// of such rules held every replica's policy watch for a minute).
		cel.ParserRecursionLimit(MaxWhenDepth),
	)
})

// celProblem is a CEL compile error with its line and column within the
// expression (1-based line, 0-based column; 0 when unknown).
type celProblem struct {
	line, col int
	msg       string
}

// condition is a compiled `when`. Every evaluation could run with CEL's
// cost tracking and CostLimit; since tracking triples the cost of a
// condition, the cheap program (no tracking) runs instead when CEL's own
// static estimate proves the limit cannot be reached: the estimate is
// made at compile time for inputs up to fastSizes, and fastUpTo is the
// largest such size that stays under the limit. A call whose variables
// (every string, list and map the condition can reach) are all no larger
// than fastUpTo runs the cheap program, any other the tracked one. Both
// give the same answer wherever the limit is not reached.
type condition struct {
	src      string
	tracked  cel.Program
	cheap    cel.Program
	fastUpTo int // 0: always tracked
}

// fastSizes are the input sizes the cost is estimated for.
var fastSizes = [...]int{64 << 10, 8 << 10, 1 << 10, 128}

// compileWhen compiles and type-checks a condition, which must be a bool.
func compileWhen(src string) (*condition, []celProblem) {
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
	c := &condition{src: src}
	if c.tracked, err = env.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize)); err != nil {
		return nil, []celProblem{{msg: err.Error()}}
	}
	for _, size := range fastSizes {
		est, err := env.EstimateCost(ast, sizeBound(size))
		if err == nil && est.Max <= CostLimit {
			c.fastUpTo = size
			break
		}
	}
	if c.fastUpTo > 0 {
		if c.cheap, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, []celProblem{{msg: err.Error()}}
		}
	}
	return c, nil
}

// sizeBound is a cost estimator that bounds every string, list and map
// the condition reads at n (characters, elements or entries).
type sizeBound int

func (s sizeBound) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: uint64(s)}
}

func (sizeBound) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// errCostLimit marks a condition stopped by CostLimit.
var errCostLimit = errors.New("cost limit exceeded")

// eval runs the condition: its value, or an error (errCostLimit when the
// cost limit stopped it).
func (c *condition) eval(act *activation) (bool, error) {
	prg := c.tracked
	if c.cheap != nil && act.maxSize() <= c.fastUpTo {
		prg = c.cheap
	}
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

// activation resolves the CEL variables of one decision, each converted
// once, on first use.
type activation struct {
	argsIn   *Args
	callerIn *toolwirev1.Caller
	toolIn   *toolwirev1.ToolSpec

	args, caller, tool ref.Val
	size               int // maxSize, once computed; -1 before
}

var emptyCaller = &toolwirev1.Caller{}

func newActivation(in *Input) *activation {
	return &activation{argsIn: in.Args, callerIn: in.Caller, toolIn: in.Tool, size: -1}
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if a.args == nil {
			a.args = types.NewStringInterfaceMap(types.DefaultTypeAdapter, a.argsIn.Value())
		}
		return a.args, true
	case "caller":
		if a.caller == nil {
			c := a.callerIn
			if c == nil {
				c = emptyCaller
			}
			a.caller = &celObject{typ: callerType, v: c}
		}
		return a.caller, true
	case "tool":
		if a.tool == nil {
			a.tool = &celObject{typ: toolType, v: newCELTool(a.toolIn)}
		}
		return a.tool, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// maxSize bounds the size of every string, list and map a condition can
// reach through the variables: no string in the arguments has more
// characters, and no list or map more elements, than their canonical
// text has bytes.
func (a *activation) maxSize() int {
	if a.size >= 0 {
		return a.size
	}
	n := len(a.argsIn.Canonical())
	c := a.callerIn
	for _, s := range [...]string{c.GetTenant(), c.GetAgent(), c.GetSession(), c.GetUser(), c.GetRun(), c.GetTurn(), c.GetMode(),
		c.GetParentTool(), c.GetParentCallId(), c.GetRootCallId(), c.GetModel(), c.GetModelFamily()} {
		n = max(n, len(s))
	}
	n = max(n, len(c.GetScopes()))
	for _, s := range c.GetScopes() {
		n = max(n, len(s))
	}
	t := a.toolIn
	for _, s := range [...]string{t.GetName(), t.GetVersion(), t.GetProvider()} {
		n = max(n, len(s))
	}
	n = max(n, len(t.GetScopes()))
	for _, s := range t.GetScopes() {
		n = max(n, len(s))
	}
	a.size = n
	return n
}
