package policy

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/google/jsonschema-go/jsonschema"
)

// TestSchemaMatchesLoader keeps schema.json and the loader in step: every
// key the loader reads is in the schema, and no other.
func TestSchemaMatchesLoader(t *testing.T) {
	t.Parallel()
	var s struct {
		Properties map[string]any `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	check := func(what string, schemaKeys map[string]any, keys []string) {
		got := slices.Sorted(mapKeys(schemaKeys))
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Errorf("%s: schema has %q, loader reads %q", what, got, keys)
		}
	}
	check("top level", s.Properties, append(slices.Clone(topKeys), "policy"))
	check("rule", s.Defs["rule"].Properties, yamlKeys(reflect.TypeFor[ruleDoc]()))
	check("test", s.Defs["test"].Properties, yamlKeys(reflect.TypeFor[testDoc]()))
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func yamlKeys(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		out = append(out, name)
	}
	return out
}

// TestExamplesValidate checks the shipped policy and test files against
// the schema, as an editor would.
func TestExamplesValidate(t *testing.T) {
	t.Parallel()
	var sch jsonschema.Schema
	if err := json.Unmarshal(Schema(), &sch); err != nil {
		t.Fatal(err)
	}
	resolved, err := sch.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{sandboxFile, "../examples/policies/sandbox_test.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
	bad := map[string]any{"rules": []any{map[string]any{"name": "x", "tool": "y", "action": "alow"}}}
	if resolved.Validate(bad) == nil {
		t.Error("the schema accepts an unknown action")
	}
}
