package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// DefaultCostLimit bounds the work of one condition (CEL's cost units,
// roughly one per operation and per list element visited). A condition
// that exceeds it fails, and the call is asked.
const DefaultCostLimit = 100_000

// celEnvs builds the CEL environments for conditions: one for rules on the
// whole call (tool, args, thread) and one for per-command rules, which also
// see the command. Helpers analyse command strings through cache.
func celEnvs(cache *analysisCache) (call, command *cel.Env, err error) {
	sh := celShell{cache: cache}
	strList := cel.ListType(cel.StringType)
	common := []cel.EnvOption{
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("thread", cel.StringType),
		cel.Variable("annotations", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("dir", cel.StringType),
		ext.NativeTypes(reflect.TypeFor[shell.Command](), reflect.TypeFor[shell.Redirect](), ext.ParseStructTag("json")),
		ext.Strings(),
		ext.Lists(),
		ext.Bindings(),
		cel.CrossTypeNumericComparisons(true),
		cel.Function("commands",
			cel.Overload("commands_string", []*cel.Type{cel.StringType}, strList,
				cel.UnaryBinding(sh.commands))),
		cel.Function("commands_all_in",
			cel.Overload("commands_all_in_string_list", []*cel.Type{cel.StringType, strList}, cel.BoolType,
				cel.BinaryBinding(sh.commandsIn(true)))),
		cel.Function("commands_any_in",
			cel.Overload("commands_any_in_string_list", []*cel.Type{cel.StringType, strList}, cel.BoolType,
				cel.BinaryBinding(sh.commandsIn(false)))),
		cel.Function("writes_files",
			cel.Overload("writes_files_string", []*cel.Type{cel.StringType}, cel.BoolType,
				cel.UnaryBinding(sh.writesFiles))),
		cel.Function("path_inside",
			cel.Overload("path_inside_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(celPathInside))),
		cel.Function("url_host",
			cel.Overload("url_host_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(celURLHost))),
		pathTest("path_secret", PathSecret),
		pathTest("path_in_git", PathInGit),
		cel.Function("shell_review",
			cel.Overload("shell_review_string", []*cel.Type{cel.StringType}, strList,
				cel.UnaryBinding(sh.review))),
	}
	call, err = cel.NewEnv(common...)
	if err != nil {
		return nil, nil, err
	}
	command, err = call.Extend(cel.Variable("command", cel.ObjectType("shell.Command")))
	return call, command, err
}

// celShell holds the condition functions that analyse command strings,
// through cache.
type celShell struct {
	cache *analysisCache
}

func (sh celShell) analyze(v ref.Val) (*shell.Analysis, ref.Val) {
	s, ok := v.(types.String)
	if !ok {
		return nil, types.NewErr("expected a command string, got %s", v.Type())
	}
	a := sh.cache.analyze(string(s))
	if a.Err != nil {
		return nil, types.NewErr("%v", a.Err)
	}
	return a.Analysis, nil
}

// commands is commands(string): the names of the commands it runs.
func (sh celShell) commands(v ref.Val) ref.Val {
	a, errv := sh.analyze(v)
	if errv != nil {
		return errv
	}
	return types.NewStringList(types.DefaultTypeAdapter, a.Names())
}

// commandsIn is commands_all_in (all: every command the shell would
// run, and at least one) or commands_any_in (any of them) named in the
// list; a command whose name is computed (dynamic) never is.
func (sh celShell) commandsIn(all bool) func(v, l ref.Val) ref.Val {
	return func(v, l ref.Val) ref.Val {
		a, errv := sh.analyze(v)
		if errv != nil {
			return errv
		}
		list, errv := celNames(l)
		if errv != nil {
			return errv
		}
		if all && len(a.Commands) == 0 {
			return types.False
		}
		for i := range a.Commands {
			c := &a.Commands[i]
			if in := !c.Dynamic && inNameList(c.Name, list); in != all {
				return types.Bool(in)
			}
		}
		return types.Bool(all)
	}
}

// writesFiles is writes_files(string).
func (sh celShell) writesFiles(v ref.Val) ref.Val {
	a, errv := sh.analyze(v)
	if errv != nil {
		return errv
	}
	return types.Bool(a.Writes())
}

// review is shell_review(string): why the analysis asks a person.
func (sh celShell) review(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.NewErr("expected a command string")
	}
	return types.NewStringList(types.DefaultTypeAdapter, sh.cache.analyze(string(s)).reasons)
}

// celNames reads a CEL list of names.
func celNames(v ref.Val) ([]string, ref.Val) {
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, types.NewErr("expected a list of names")
	}
	var out []string
	for it := l.Iterator(); it.HasNext() == types.True; {
		s, ok := it.Next().(types.String)
		if !ok {
			return nil, types.NewErr("expected a list of strings")
		}
		out = append(out, string(s))
	}
	return out, nil
}

// inNameList reports whether a pattern of list matches name.
func inNameList(name string, list []string) bool {
	for _, pat := range list {
		if matchName(pat, name) {
			return true
		}
	}
	return false
}

// celPathInside is path_inside(path, dir).
func celPathInside(p, d ref.Val) ref.Val {
	ps, ok1 := p.(types.String)
	ds, ok2 := d.(types.String)
	if !ok1 || !ok2 {
		return types.NewErr("path_inside takes two strings")
	}
	return types.Bool(PathInside(string(ps), string(ds)))
}

// celURLHost is url_host(url).
func celURLHost(u ref.Val) ref.Val {
	us, ok := u.(types.String)
	if !ok {
		return types.NewErr("url_host takes a string")
	}
	return types.String(URLHost(string(us)))
}

// pathTest is a condition function of one path that tests its name.
func pathTest(name string, test func(string) bool) cel.EnvOption {
	return cel.Function(name,
		cel.Overload(name+"_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(p ref.Val) ref.Val {
				ps, ok := p.(types.String)
				if !ok {
					return types.NewErr("%s takes a string", name)
				}
				return types.Bool(test(string(ps)))
			})))
}

// condition is a compiled condition. Tracking the cost of every operation
// at run time is most of the time of an evaluation, so a condition whose
// cost is provably under the limit for small inputs also gets a program
// without tracking, used when the inputs are that small. Small is
// fastUpTo: by CEL's static estimate, with no string, list or map longer
// than it, the condition stays under the limit.
type condition struct {
	tracked  cel.Program
	fast     cel.Program // nil when no size tier fits the limit
	fastUpTo int
	callVars bool // reads tool, args or thread, so their size counts
}

// sizeTiers are the input sizes tried for the fast program, largest
// first.
var sizeTiers = []int{1024, 256, 64, 16}

// unbounded is the size of an input too large or too deep to measure.
const unbounded = int(^uint(0) >> 1)

func compileCond(env *cel.Env, src string, costLimit uint64) (*condition, error) {
	ast, iss := env.CompileSource(common.NewStringSource(src, "when"))
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("the condition is of type %s, not bool", ast.OutputType())
	}
	c := &condition{}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		switch ref.Name {
		case "tool", "args", "thread", "annotations", "dir":
			c.callVars = true
		}
	}
	var err error
	c.tracked, err = env.Program(ast, cel.CostLimit(costLimit), cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	for _, size := range sizeTiers {
		est, err := env.EstimateCost(ast, sizeEstimator(size))
		if err != nil || est.Max > costLimit {
			continue
		}
		if c.fast, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100)); err != nil {
			return nil, err
		}
		c.fastUpTo = size
		break
	}
	return c, nil
}

// sizeEstimator sizes every input at most its value.
type sizeEstimator int

func (e sizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if n.Path() == nil {
		return nil
	}
	return &cost.SizeEstimate{Max: uint64(e)}
}

func (e sizeEstimator) EstimateCallCost(fn, _ string, _ *cost.AstNode, _ []cost.AstNode) *cost.CallEstimate {
	switch fn {
	case "commands", "shell_review":
		// A string of at most e bytes holds fewer commands; each reason
		// is a line of text.
		return cost.NewCallEstimate(cost.Estimate{Min: 1, Max: 1}, &cost.SizeEstimate{Max: uint64(max(4*e, 256))})
	}
	return nil
}

// sizeOf returns the length of the longest string, list or map in v, as
// decoded JSON, looking at no more than *budget values (unbounded past
// that, or for other Go types).
func sizeOf(v any, budget *int) int {
	*budget--
	if *budget < 0 {
		return unbounded
	}
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		n := len(v)
		for _, x := range v {
			n = max(n, sizeOf(x, budget))
		}
		return n
	case map[string]any:
		n := len(v)
		for k, x := range v {
			n = max(n, len(k), sizeOf(x, budget))
		}
		return n
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32:
		return 0
	}
	return unbounded
}

func stringsSize(list []string) int {
	n := len(list)
	for _, s := range list {
		n = max(n, len(s))
	}
	return n
}

// commandSize is sizeOf for a command.
func commandSize(c *shell.Command) int {
	n := max(len(c.Name), len(c.Path), len(c.Redirects), stringsSize(c.Args), stringsSize(c.Env), stringsSize(c.Via), stringsSize(c.Review),
		stringsSize(c.Files), stringsSize(c.Outside), stringsSize(c.Unknown), stringsSize(c.Secrets))
	for _, r := range c.Redirects {
		n = max(n, len(r.Op), len(r.FD), len(r.Target))
	}
	return n
}

// activation gives a condition its variables without building a map.
type activation struct {
	call Call
	cmd  *shell.Command
}

var emptyArgs = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.call.Tool, true
	case "args":
		if a.call.Args == nil {
			return emptyArgs, true
		}
		return a.call.Args, true
	case "thread":
		return a.call.ThreadID, true
	case "dir":
		return a.call.Dir, true
	case "annotations":
		if a.call.Annotations == nil {
			return emptyArgs, true
		}
		return a.call.Annotations, true
	case "command":
		if a.cmd != nil {
			return a.cmd, true
		}
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

var errNotBool = errors.New("the condition did not return a bool")

// evalCond evaluates a condition; ctx is nil when it cannot be canceled,
// which saves the cancellation checks. size is the size of the inputs it
// reads (sizeOf), which chooses the program.
func evalCond(ctx context.Context, c *condition, size int, act *activation) (bool, error) {
	var out ref.Val
	var err error
	prg := c.tracked
	if c.fast != nil && size <= c.fastUpTo {
		prg = c.fast
	}
	if ctx == nil {
		out, _, err = prg.Eval(act)
	} else {
		out, _, err = prg.ContextEval(ctx, act)
	}
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errNotBool
	}
	return bool(b), nil
}
