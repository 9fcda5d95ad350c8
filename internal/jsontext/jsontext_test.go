package jsontext_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

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

// stdMarshal is what Marshal must equal: encoding/json without HTML
// escaping.
func stdMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// The values Marshal encodes itself come out byte for byte as
// encoding/json writes them: every escape, invalid UTF-8, U+2028, numbers
// at the exponent cutoffs, nil maps and lists, nested values, and a value
// of another type anywhere inside (encoded by encoding/json whole).
func TestMarshalAsEncodingJSON(t *testing.T) {
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	strs := []string{"", "plain", all.String(), "a\u2028b\u2029c", "bad \xff\xfe utf8 \xe2\x82", "é 日本 🎉", `"quoted" \back\`, "<a href='x'>&amp;</a>", "\x00\x1f\x7f"}
	nums := []any{0, -1, int64(math.MaxInt64), int32(-7), uint64(math.MaxUint64), 0.0, math.Copysign(0, -1), 1.5, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, -2.5e-10,
		math.SmallestNonzeroFloat64, math.MaxFloat64, float32(1e-6), float32(3.4e38), float32(0.1), float32(1e21)}
	var cases []any
	for _, s := range strs {
		cases = append(cases, map[string]any{s: s}, map[string]string{s: s, "k": s}, []string{s}, []any{s})
	}
	for _, n := range nums {
		cases = append(cases, map[string]any{"n": n}, []any{n})
	}
	var nilMap map[string]any
	var nilStrs map[string]string
	cases = append(cases,
		map[string]any{}, []any{}, []string{}, nilMap, nilStrs, []any(nil), []string(nil),
		map[string]any{"m": nilMap, "s": []string(nil), "a": []any(nil), "ss": nilStrs, "nil": nil, "t": true, "f": false},
		map[string]any{"question_id": "hitl_c1", "call_id": "c1", "kind": "approve", "status": "answered", "by": "alice", "digest": "v2:sha256:ab", "latency_ms": int64(1234)},
		map[string]any{"b": 1, "a": map[string]any{"z": []any{1, "x", map[string]string{"q": "r"}}, "y": []string{"1", "2"}}, "B": 2, "é": 3, "_": 4},
		// Other types inside: encoding/json encodes the whole value.
		map[string]any{"raw": json.RawMessage(` {"a" : 1} `), "s": "x<y"},
		map[string]any{"time": time.Date(2026, 12, 7, 5, 0, 0, 1, time.UTC)},
		map[string]any{"struct": struct{ A int }{1}, "int8": int8(3), "uint": uint(4)},
		[]any{map[string]int{"a": 1}},
	)
	for _, v := range cases {
		got, err := jsontext.Marshal(v)
		want, werr := stdMarshal(v)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("%#v:\n got %s, %v\nwant %s, %v", v, got, err, want, werr)
		}
	}
	// What encoding/json refuses is refused, with its error: also a value
	// that holds itself (not a stack overflow).
	self := map[string]any{}
	self["self"] = self
	loop := []any{nil}
	loop[0] = loop
	for _, v := range []any{map[string]any{"n": math.NaN()}, []any{math.Inf(1)}, map[string]any{"f": float32(math.Inf(-1))}, self, loop} {
		if _, err := jsontext.Marshal(v); err == nil {
			t.Errorf("%v: no error", v)
		}
	}
}

// Any string, valid UTF-8 or not, comes out as encoding/json writes it.
func FuzzMarshalString(f *testing.F) {
	for _, s := range []string{"", "a\u2028", "\xff", "\x00<>&\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := map[string]any{s: []any{s, map[string]string{"k": s}}}
		got, err := jsontext.Marshal(v)
		want, _ := stdMarshal(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, %v; want %s", s, got, err, want)
		}
	})
}

// BenchmarkMarshal encodes a tool_result audit entry with its hitl trace,
// as the agent writes one per tool call; std is encoding/json.
func BenchmarkMarshal(b *testing.B) {
	entry := map[string]any{"call_id": "call_1", "tool": "bash", "is_error": false, "digest": "v2:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"policy_digest": "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		"hitl":          map[string]any{"decision": "human_approve", "by": "alice", "answer_digest": "v2:sha256:9f86d08188"}}
	for _, c := range []struct {
		name string
		f    func(any) ([]byte, error)
	}{{"jsontext", jsontext.Marshal}, {"std", stdMarshal}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(entry); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// json.Number and json.RawMessage come out as encoding/json writes them
// (Marshal), and MarshalHTML is json.Marshal, HTML escapes and all, for
// every value Marshal encodes itself.
func TestNumbersRawAndHTMLAsEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", "<a href='x'>&amp;</a>", "a\u2028b", "bad \xff", `"q" \b`, "\x00\x1f"}
	numbers := []json.Number{"0", "-0", "1", "-12.50", "1e5", "1E+05", "2.5e-10", "", "01", "1.", ".5", "-", "1e", "1e+", "abc", "1 ", "0x10", "123456789012345678901234567890"}
	var cases []any
	for _, s := range strs {
		cases = append(cases, map[string]any{s: s, "l": []any{s}}, map[string]string{s: s}, []string{s})
	}
	for _, n := range numbers {
		cases = append(cases, map[string]any{"n": n}, []any{n, map[string]any{"m": n}})
	}
	for _, raw := range []json.RawMessage{nil, {}, json.RawMessage(`{"a":[1,"<b>"]}`), json.RawMessage(`{"a": 1}`), json.RawMessage(`{"a":`), json.RawMessage(`"\u2028 &"`), json.RawMessage("\"a\u2028\"")} {
		cases = append(cases, raw, map[string]any{"raw": raw})
	}
	for _, v := range cases {
		got, err := jsontext.Marshal(v)
		want, werr := stdMarshal(v)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v):\n got %s, %v\nwant %s, %v", v, got, err, want, werr)
		}
		got, err = jsontext.MarshalHTML(v)
		want, werr = json.Marshal(v)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || !bytes.Equal(got, want) {
			t.Errorf("MarshalHTML(%#v):\n got %s, %v\nwant %s, %v", v, got, err, want, werr)
		}
	}
}

// FuzzMarshalHTML: any string and number literal, as json.Marshal and
// encoding/json without HTML escaping write them.
func FuzzMarshalHTML(f *testing.F) {
	f.Add("a<b>&c\u2028", "1.5e3")
	f.Add("\xff", "-")
	f.Fuzz(func(t *testing.T, s, n string) {
		v := map[string]any{s: []any{s, json.Number(n)}, "k": map[string]string{s: s}}
		got, err := jsontext.MarshalHTML(v)
		want, werr := json.Marshal(v)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q %q: MarshalHTML %s, %v; json.Marshal %s, %v", s, n, got, err, want, werr)
		}
		got, err = jsontext.Marshal(v)
		want, werr = stdMarshal(v)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q %q: Marshal %s, %v; encoding/json %s, %v", s, n, got, err, want, werr)
		}
	})
}
