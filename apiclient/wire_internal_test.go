package apiclient

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestUnescapeHTML(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"cmd":"a \u003e b \u0026\u0026 \u003cc\u003e"}`, `{"cmd":"a > b && <c>"}`},
		{`{"x": "\u003C\u003E"}`, `{"x":"<>"}`},
		// An escaped backslash followed by u003c is text, not an escape.
		{`["\\u003c", "\\\u003c"]`, `["\\u003c","\\<"]`},
		// Other escapes stay as written, numbers digit for digit, keys in order.
		{"{\n  \"z\": 1.50, \"a\": 12345678901234567890,\n  \"s\": \"\\u2028\\n\\\"\\u0000\\/\"\n}", `{"z":1.50,"a":12345678901234567890,"s":"\u2028\n\"\u0000\/"}`},
		{`"plain"`, `"plain"`},
		{` true `, `true`},
	} {
		got, err := unescapeHTML([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("unescapeHTML(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := unescapeHTML([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
	// Stored JSON that is not valid is shown as text, not a broken body.
	out, err := json.Marshal(struct{ P RawJSON }{RawJSON(`{"a":`)})
	if err != nil || string(out) != `{"P":"{\"a\":"}` {
		t.Errorf("invalid stored JSON: %s %v", out, err)
	}
}

// FuzzUnescapeHTML: the output is valid JSON of the same value, with no
// HTML escapes left.
func FuzzUnescapeHTML(f *testing.F) {
	for _, s := range []string{`{"a":"\u003c\u003e\u0026"}`, `["\\u003c"]`, `1e5`, `{"k":[null,true,"\ud83d\ude00"]}`, `"\u0026amp;"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		out, err := unescapeHTML([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		decode := func(b []byte) any {
			var v any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			return v
		}
		if !reflect.DeepEqual(decode([]byte(in)), decode(out)) {
			t.Fatalf("%s became %s", in, out)
		}
		for _, esc := range [][]byte{[]byte(`\u003c`), []byte(`\u003e`), []byte(`\u0026`)} {
			if i := bytes.Index(out, esc); i >= 0 && (i == 0 || out[i-1] != '\\') {
				t.Fatalf("%s kept an HTML escape: %s", in, out)
			}
		}
	})
}
