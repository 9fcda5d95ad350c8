package jsontext_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// Any JSON text, decoded as the agent decodes arguments (UseNumber), is
// written by MarshalHTML as json.Marshal writes it (the digest's bytes),
// and by Marshal as encoding/json without HTML escaping.
func FuzzMarshalHTMLDecoded(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"a":[1,"<b>",{"c":-0,"d":1e400,"e":"\u2028\ud800x"}],"b":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		var top any = v
		switch v.(type) {
		case map[string]any, []any:
		default:
			top = []any{v}
		}
		got, err := jsontext.MarshalHTML(top)
		want, werr := json.Marshal(top)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: MarshalHTML %q, %v; json.Marshal %q, %v", raw, got, err, want, werr)
		}
		got, err = jsontext.Marshal(top)
		want, werr = stdMarshal(top)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: Marshal %q, %v; encoding/json %q, %v", raw, got, err, want, werr)
		}
		// A json.RawMessage of the text, as Marshal writes it.
		got, err = jsontext.Marshal(json.RawMessage(raw))
		want, werr = stdMarshal(json.RawMessage(raw))
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: Marshal(RawMessage) %q, %v; encoding/json %q, %v", raw, got, err, want, werr)
		}
	})
}
