package agent

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// A raw tool's value is the object decoded for its schema: equal to what
// its decode gave when it decoded the arguments a second time.
func TestRawToolValidateDecodesOnce(t *testing.T) {
	tool := NewRawTool("raw", "", func(context.Context, map[string]any) (ToolResult, error) { return ToolResult{}, nil }, nil)
	for _, c := range []string{``, ` `, `{}`, `{"a":1}`, `{"b":[1,{"c":1.50}],"a":"x"}`, `{"a":1,"a":2}`, `[]`, `{`, `"x"`} {
		got, err := tool.Validate(json.RawMessage(c))
		want, werr := validateCompiled(tool.name, tool.compiled, tool.decode, json.RawMessage(c))
		if !reflect.DeepEqual(got, want) || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Errorf("Validate(%q) = %#v, %v; decoding twice %#v, %v", c, got, err, want, werr)
		}
	}
}
