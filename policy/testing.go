package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/tollgate-ai/tollgate/internal/display"
)

// TestCase is a call and the decision a policy must reach for it, written
// under tests: in a policy file or in a test file beside it.
type TestCase struct {
	Name string
	File string
	Line int
	Call Call
	// Want is the expected action.
	Want Action
	// Rule is the expected deciding rule; empty means any.
	Rule string
	// Sandbox is the expected [Decision.Sandbox] of an allow: a profile,
	// "none" for no profile, empty for any.
	Sandbox string
}

// testDoc is a test case as written. cmd and cmds are shorthands for a
// shell tool's command argument; cmds makes one case per string.
type testDoc struct {
	Name   string         `yaml:"name"`
	Tool   string         `yaml:"tool"`
	Args   map[string]any `yaml:"args"`
	Cmd    string         `yaml:"cmd"`
	Cmds   []string       `yaml:"cmds"`
	Thread string         `yaml:"thread"`
	// Dir: the directory the call works in (Call.Dir).
	Dir string `yaml:"dir"`
	// Annotations: what the tool says of itself (an MCP server's hints).
	Annotations map[string]any `yaml:"annotations"`
	Want        string         `yaml:"want"`
	Rule        string         `yaml:"rule"`
	// Sandbox: the profile an allow must require.
	Sandbox string `yaml:"sandbox"`
}

func (l *loader) tests(n ast.Node, p *Policy) []TestCase {
	var out []TestCase
	for i, item := range l.items(n, "tests") {
		label := fmt.Sprintf("test %d", i+1)
		m, ok := item.(*ast.MappingNode)
		if !ok {
			l.errorAt(item, label, "a test must be a mapping")
			continue
		}
		if nn, ok := field(m, "name").(*ast.StringNode); ok && nn.Value != "" {
			label = fmt.Sprintf("test %q", nn.Value)
		}
		var doc testDoc
		if !l.decode(m, &doc, label) {
			continue
		}
		want := Action(doc.Want)
		if want.rank() == 0 {
			l.errorAt(start(m), label, "want must be allow, ask or block, not %q", doc.Want)
			continue
		}
		switch doc.Sandbox {
		case "", "none", SandboxReadOnly, SandboxWorkspaceWrite:
		default:
			l.errorAt(field(m, "sandbox"), label, "sandbox must be %s, %s or none, not %q", SandboxReadOnly, SandboxWorkspaceWrite, doc.Sandbox)
			continue
		}
		if doc.Sandbox != "" && want != Allow {
			l.errorAt(field(m, "sandbox"), label, "sandbox is for tests that want allow")
			continue
		}
		line := posOf(start(m))
		tool := doc.Tool
		cmds := doc.Cmds
		if doc.Cmd != "" {
			cmds = append([]string{doc.Cmd}, cmds...)
		}
		args := normalize(doc.Args)
		if len(cmds) == 0 {
			if tool == "" {
				l.errorAt(start(m), label, "the test has no tool")
				continue
			}
			a, _ := args.(map[string]any)
			out = append(out, TestCase{Name: testName(doc.Name, tool, a), File: l.file, Line: line,
				Call: Call{Tool: tool, Args: a, ThreadID: doc.Thread, Annotations: doc.Annotations, Dir: doc.Dir}, Want: want, Rule: doc.Rule, Sandbox: doc.Sandbox})
			continue
		}
		if tool == "" {
			if len(p.shell) != 1 {
				l.errorAt(start(m), label, "cmd needs a tool: the policy has %d shell tools", len(p.shell))
				continue
			}
			for t := range p.shell {
				tool = t
			}
		}
		arg, ok := p.shell[tool]
		if !ok {
			l.errorAt(start(m), label, "cmd is for shell tools, and %q is not one", tool)
			continue
		}
		for _, c := range cmds {
			a := map[string]any{}
			if m, ok := args.(map[string]any); ok {
				for k, v := range m {
					a[k] = v
				}
			}
			a[arg] = c
			name := doc.Name
			if len(cmds) > 1 || name == "" {
				name = strings.TrimSpace(doc.Name + " " + fmt.Sprintf("%q", c))
			}
			out = append(out, TestCase{Name: name, File: l.file, Line: line,
				Call: Call{Tool: tool, Args: a, ThreadID: doc.Thread, Annotations: doc.Annotations, Dir: doc.Dir}, Want: want, Rule: doc.Rule, Sandbox: doc.Sandbox})
		}
	}
	return out
}

func testName(name, tool string, args map[string]any) string {
	if name != "" {
		return name
	}
	// As people read it: >> stays >>, invisible characters show.
	return tool + " " + display.JSON(args)
}

// normalize makes YAML values look like decoded JSON: float64 numbers and
// maps with string keys.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normalize(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprint(k)] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalize(x)
		}
		return out
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case float32:
		return float64(v)
	}
	return v
}

// LoadTests reads a test file: a YAML file with tests: (and, optionally,
// policy: naming the policy file it tests, relative to the test file).
// The shorthands cmd and cmds use p's shell tools. It returns the cases
// and the policy file named, if any.
func LoadTests(path string, p *Policy) (cases []TestCase, policyFile string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	l := &loader{file: path}
	m := l.root(data)
	if m == nil {
		return nil, "", errors.Join(l.errs...)
	}
	var testsNode ast.Node
	for _, mv := range m.Values {
		switch key := keyOf(mv); key {
		case "policy":
			var s string
			if l.decode(mv.Value, &s, "") {
				policyFile = filepath.Join(filepath.Dir(path), s)
			}
		case "tests":
			testsNode = mv.Value
		default:
			l.errorAt(mv.Key, "", "unknown key %q in a test file (want policy, tests)", key)
		}
	}
	if p != nil {
		cases = l.tests(testsNode, p)
	}
	if len(l.errs) > 0 {
		return nil, policyFile, errors.Join(l.errs...)
	}
	return cases, policyFile, nil
}

// TestFileFor returns the test file kept beside a policy file
// (sandbox.yaml: sandbox_test.yaml), and whether it exists.
func TestFileFor(policyPath string) (string, bool) {
	ext := filepath.Ext(policyPath)
	name := strings.TrimSuffix(policyPath, ext) + "_test" + ext
	_, err := os.Stat(name)
	return name, err == nil
}

// TestResult is the outcome of one test case.
type TestResult struct {
	Case TestCase
	Got  Decision
	Pass bool
}

// TestReport is the outcome of a set of test cases.
type TestReport struct {
	Results        []TestResult
	Passed, Failed int
}

// OK reports whether every case passed.
func (r *TestReport) OK() bool { return r.Failed == 0 }

// RunTests evaluates each case against the policy.
func (p *Policy) RunTests(ctx context.Context, cases []TestCase) *TestReport {
	rep := &TestReport{}
	for _, tc := range cases {
		got := p.Evaluate(ctx, tc.Call)
		pass := got.Action == tc.Want && (tc.Rule == "" || got.Rule == tc.Rule) && sandboxMatches(tc.Sandbox, got.Sandbox)
		rep.Results = append(rep.Results, TestResult{Case: tc, Got: got, Pass: pass})
		if pass {
			rep.Passed++
		} else {
			rep.Failed++
		}
	}
	return rep
}

// Write prints the report: a want/got block for each failure (and a line
// for each pass when verbose), then a summary line.
func (r *TestReport) Write(w io.Writer, verbose bool) error {
	var b strings.Builder
	for _, res := range r.Results {
		tc := res.Case
		where := fmt.Sprintf("%s:%d", tc.File, tc.Line)
		if res.Pass {
			if verbose {
				fmt.Fprintf(&b, "ok    %s %s: %s\n", where, tc.Name, res.Got.Action)
			}
			continue
		}
		args := display.JSON(tc.Call.Args)
		fmt.Fprintf(&b, "FAIL  %s %s\n", where, tc.Name)
		fmt.Fprintf(&b, "      call: %s %s\n", tc.Call.Tool, args)
		fmt.Fprintf(&b, "    - want: %s%s\n", expectation(tc.Want, tc.Rule), sandboxNote(tc.Sandbox))
		got := ""
		if tc.Sandbox != "" && res.Got.Action == Allow {
			got = sandboxNote(cmp.Or(res.Got.Sandbox, "none"))
		}
		fmt.Fprintf(&b, "    + got:  %s%s\n", expectation(res.Got.Action, res.Got.Rule), got)
		if res.Got.Reason != "" {
			fmt.Fprintf(&b, "      reason: %s\n", res.Got.Reason)
		}
		for _, m := range res.Got.Matched {
			fmt.Fprintf(&b, "      matched: %s\n", formatMatch(m))
		}
	}
	status := "ok"
	if !r.OK() {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "%s: %d passed, %d failed\n", status, r.Passed, r.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}

func expectation(a Action, rule string) string {
	if rule == "" {
		return string(a)
	}
	return fmt.Sprintf("%s (rule %s)", a, rule)
}

func sandboxMatches(want, got string) bool {
	return want == "" || want == cmp.Or(got, "none")
}

func sandboxNote(s string) string {
	if s == "" {
		return ""
	}
	return ", sandbox " + s
}

func formatMatch(m Match) string {
	s := fmt.Sprintf("%s %s", m.Action, m.Rule)
	if m.Command != "" {
		s += " on `" + m.Command + "`"
	}
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	return s
}

// RunTestFile runs the tests of a file. For a policy file: the tests
// written in it and those in the test file beside it (TestFileFor). For a
// test file (one with policy: and tests: but no rules): its tests against
// the policy it names. A policy or test file that does not load is an
// error; failing tests are in the report.
func RunTestFile(ctx context.Context, path string, opts *Options) (*TestReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	policyPath, testPath := path, ""
	if isTestFile(data) {
		_, named, err := LoadTests(path, nil)
		if err != nil {
			return nil, err
		}
		if named == "" {
			return nil, &Error{File: path, Msg: "a test file needs policy: naming the policy file it tests"}
		}
		policyPath, testPath = named, path
	} else if beside, ok := TestFileFor(path); ok {
		testPath = beside
	}
	p, err := Load(policyPath, opts)
	if err != nil {
		return nil, err
	}
	cases := p.Tests()
	if testPath != "" {
		more, _, err := LoadTests(testPath, p)
		if err != nil {
			return nil, err
		}
		cases = append(cases, more...)
	}
	if len(cases) == 0 {
		return nil, &Error{File: path, Msg: "no tests: write them under tests: in the policy file or in " + filepath.Base(besideName(policyPath))}
	}
	return p.RunTests(ctx, cases), nil
}

// isTestFile reports whether data is a test file: a mapping with a policy
// key and no rules key.
func isTestFile(data []byte) bool {
	l := &loader{}
	m := l.root(data)
	return m != nil && field(m, "policy") != nil && field(m, "rules") == nil
}

func besideName(policyPath string) string {
	name, _ := TestFileFor(policyPath)
	return name
}
