package hitl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

var argsCases = []string{
	`{}`, `{"cmd":"ls"}`, `{"a":1,"b":[true,false,null,-0.5e+3,{"c":"d"}],"c":{}}`, `{"cmd":"echo a \u003e b \u0026\u0026 cat \u003cin"}`,
	`{"s":"q\" b\\ \b\f\n\r\t \u0000\u001f \u2028\u2029 é ✓"}`, `{"s":"\\u003c"}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a": 1}`,
	`{"a":"<"}`, `{"a":"\u00e9"}`, `{"a":"\/"}`, `{"a":"\u000a"}`, `{"a":"\u001F"}`, `{"a":"\ufffd"}`, "{\"a\":\"\xff\"}",
	"{\"a\":\"\u2028\"}", `{"\u0061":1}`, `{"a<":1}`, `{"a":01}`, `{"a":1.}`, `{"a":tru}`, `{"a":1} `, `{"a":1}{}`, `[]`, `"x"`,
	`{"a":[]}`, `{"a":[1,]}`, `{"a":{"b":1,"a":2}}`, `{"":1,"a":2}`, `{"a":1,"":2}`, `{"A":1,"a":2,"é":3}`, `{"a":"x`, `{`, `{"a"`,
	`{"n":123456789012345678901234567890,"m":1E5,"o":-0}`,
}

// The payload's args from canonical text are what decoding and encoding
// them gives, and the usual arguments take that way.
func TestCanonicalArgsText(t *testing.T) {
	t.Parallel()
	for _, c := range argsCases {
		checkArgsText(t, []byte(c))
	}
	for _, c := range []string{`{}`, `{"cmd":"ls"}`, argsCases[2], argsCases[3], argsCases[4], argsCases[5]} {
		if _, _, ok := canonicalArgsText([]byte(c)); !ok {
			t.Errorf("%s: not taken as canonical", c)
		}
	}
	deep := strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001)
	checkArgsText(t, []byte(deep))
}

func FuzzCanonicalArgsText(f *testing.F) {
	for _, c := range argsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkArgsText(t, raw)
		// And its canonical form, which the run hands middleware.
		if m, err := decodeArgs(raw); err == nil && m != nil {
			if canon, err := jsontext.MarshalHTML(m); err == nil {
				checkArgsText(t, canon)
				if _, _, ok := canonicalArgsText(canon); !ok && len(canon) < 2000 {
					// Only keys with escapes may go the long way.
					if !bytes.Contains(canon, []byte(`\`)) {
						t.Errorf("%s: canonical, not taken", canon)
					}
				}
			}
		}
	})
}

func checkArgsText(t *testing.T, raw []byte) {
	t.Helper()
	text, empty, ok := canonicalArgsText(raw)
	if !ok {
		return
	}
	m, err := decodeArgs(raw)
	if err != nil {
		t.Fatalf("%s: taken as canonical, but decoding fails: %v", raw, err)
	}
	if empty != (len(m) == 0) {
		t.Fatalf("%s: empty %v, decoded %v", raw, empty, m)
	}
	if empty {
		return
	}
	want, err := jsontext.Marshal(m)
	if err != nil || !bytes.Equal(text, want) {
		t.Fatalf("%s: text %s, want %s (%v)", raw, text, want, err)
	}
	if canon, err := jsontext.MarshalHTML(m); err != nil || !bytes.Equal(canon, raw) {
		t.Fatalf("%s taken as canonical; MarshalHTML gives %s", raw, canon)
	}
}

// The payload written with the arguments' text is the one written from
// them decoded.
func TestQuestionPayloadFromText(t *testing.T) {
	t.Parallel()
	for _, c := range argsCases {
		text, empty, ok := canonicalArgsText([]byte(c))
		if !ok {
			continue
		}
		args, _ := decodeArgs(json.RawMessage(c))
		p := Payload{Kind: KindApprove, ToolName: "bash", Details: map[string]any{"rule": "r"}}
		withArgs := p
		withArgs.Args = args
		want, _ := jsontext.Marshal(withArgs)
		if empty {
			text = nil
		}
		got, err := jsontext.Marshal(encodedPayloadArgs(p, text, []byte(c)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %s, want %s", c, got, want)
		}
	}
}
