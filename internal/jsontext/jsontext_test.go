package jsontext_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

func ExampleMarshal() {
	b, _ := jsontext.Marshal(map[string]string{"cmd": "echo a >> log && cat <in"})
	fmt.Println(string(b))
	// Output: {"cmd":"echo a >> log && cat <in"}
}

func TestMarshalDecodesAsMarshal(t *testing.T) {
	v := map[string]any{"s": "<a href='x'>&amp;</a>\u2028\n", "n": 1.5, "l": []any{"a", nil, true}}
	got, err := jsontext.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	std, _ := json.Marshal(v)
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(std, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%s decodes differently from %s", got, std)
	}
	if got[len(got)-1] == '\n' {
		t.Fatal("trailing newline")
	}
	if _, err := jsontext.Marshal(func() {}); err == nil {
		t.Fatal("no error for a value JSON cannot hold")
	}
}
