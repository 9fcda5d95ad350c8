package jsontext_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

// canonicalCases are texts CanonicalHTML says true of: json.Marshal's
// text of their own decoding.
var canonicalCases = []string{
	`{}`,
	`{"a":1}`,
	`{"text":"hi"}`,
	`{"path":"/tmp/n","text":"hello"}`,
	`{"a":[],"b":{},"c":[{}],"d":null,"e":true,"f":false}`,
	`{"n":-0,"o":1e400,"p":1.5E-7,"q":123456789012345678901234567890,"r":0.1}`,
	`{"s":"\u003cb\u003e \u0026 \"q\" \\ \b\f\n\r\t \u0000\u001f"}`,
	"{\"s\":\"\u00e9 \u65e5\u672c \U0001F600 \\u2028\\u2029 \u00ff \x7f\"}",
	`{"a":{"a":{"a":[1,[2,[3]]]}}}`,
	`{"A":1,"B":2,"a":3,"b":4}`,
	"{\"e\":0,\"\u00e9\":1,\"\U0001F600\":2}",
	`{"a":1,"a0":2,"a~":3}`,
	`{"":"","#":"#"}`,
}

// notCanonicalCases are texts it says false of: not canonical, or
// canonical in a way it does not check (an escaped key).
var notCanonicalCases = []string{
	``, ` `, `{`, `}`, `[]`, `"a"`, `1`, `null`, `{}{}`, `{} `, ` {}`,
	`{"a": 1}`, `{ "a":1}`, `{"a":1 }`, `{"a":1,}`, `{,"a":1}`, `{"a"}`, `{"a":}`, `{a:1}`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":1}}`, `{"B":1,"A":1}`, "{\"\u00e9\":1,\"e\":0}", `{"s":"\u007f"}`,
	`{"\u0061":1}`, `{"a\"b":1}`, `{"<":1}`, `{"&":1}`, "{\"\u2028\":1}", "{\"\xff\":1}",
	`{"s":"<"}`, `{"s":">"}`, `{"s":"&"}`, `{"s":"\u003C"}`, `{"s":"\/"}`, `{"s":"\u0041"}`,
	`{"s":"\u0008"}`, `{"s":"\u0009"}`, `{"s":"\u000a"}`, `{"s":"\u000c"}`, `{"s":"\u000d"}`, `{"s":"\u001F"}`,
	`{"s":"\u0020"}`, `{"s":"\ufffd"}`, `{"s":"\ud83d\ude00"}`, "{\"s\":\"\u2028\"}", "{\"s\":\"\u2029\"}",
	"{\"s\":\"\xff\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"s\":\"\xc3\"}", "{\"s\":\"a\tb\"}", "{\"s\":\"\x00\"}",
	`{"s":"\x"}`, `{"s":"\u12"}`, `{"s":"abc`, `{"s":"abc\`,
	`{"n":01}`, `{"n":1.}`, `{"n":.1}`, `{"n":+1}`, `{"n":1e}`, `{"n":-}`, `{"n":0x1}`, `{"n":NaN}`, `{"n":1 }`,
	`{"t":tru}`, `{"t":True}`, `{"t":nul}`, `{"t":falsey}`,
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 ,2]}`, `{"a":[1}`, `{"a":{]}`,
	strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat(`}`, 1001),
	`{"a":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`,
}

func TestCanonicalHTML(t *testing.T) {
	for _, c := range canonicalCases {
		if !jsontext.CanonicalHTML([]byte(c)) {
			t.Errorf("CanonicalHTML(%q) = false, want true", c)
		}
		if got := marshalDecoded(t, []byte(c)); got != c {
			t.Errorf("case %q is not json.Marshal's text of its decoding %q", c, got)
		}
	}
	for _, c := range notCanonicalCases {
		if jsontext.CanonicalHTML([]byte(c)) {
			t.Errorf("CanonicalHTML(%q) = true, want false", c)
		}
	}
	deep := strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000)
	if !jsontext.CanonicalHTML([]byte(deep)) {
		t.Errorf("CanonicalHTML of 1,000 nested objects = false, want true")
	}
}

// marshalDecoded is json.Marshal of raw decoded as agent decodes arguments
// (UseNumber), or "" when raw is not one object.
func marshalDecoded(t *testing.T, raw []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return ""
	}
	if _, ok := v.(map[string]any); !ok {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// CanonicalHTML never says true of a text that json.Marshal would not
// write from its decoding byte for byte.
func FuzzCanonicalHTML(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	for _, c := range notCanonicalCases {
		f.Add([]byte(c))
	}
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !jsontext.CanonicalHTML(raw) {
			return
		}
		if got := marshalDecoded(t, raw); got != string(raw) {
			t.Fatalf("CanonicalHTML(%q) = true; json.Marshal of its decoding is %q", raw, got)
		}
	})
}
