package jsontext_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/jsontext"
)

var validCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a" : 1 , "b":[true,false,null]}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`,
	`{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `[1 2]`, `"x"`, `"`, `"\"`, `"\\"`, `"\/\b\f\n\r\t\u00e9\uD83D\uDE00"`,
	`"\u00g0"`, `"\u00"`, `"\x"`, "\"tab\tin\"", "\"\x7f\"", "\"bad \xff utf8\"", "\"\x00\"", `0`, `-0`, `-`, `01`, `1.`, `.5`,
	`1.5`, `-1.5e10`, `1e`, `1e+`, `1E-5`, `1e5.5`, `2.`, `-a`, `1true`, `true`, `tru`, `truex`, `false`, `null`, `nul`, `nulll`,
	`{"a":{"b":[{"c":"d"}]}}`, `[[[]]]`, `[[[]]`, `[]]`, `{}}`, `{} {}`, `1 2`, "\n[1]\r\n\t", `{"a":"b"]`, `["a"}`,
	`{"k":"v","k":"w"}`, `"12345678"`, `"1234567\"`, `"123456789012345\"6"`, `"abcdefgh\u0041bcdefgh"`, `[1,2,3,4,5,6,7,8,9,-10.5e-3]`,
	"\xef\xbb\xbf{}", `{"a":[1,{"b":null},"c"],"d":{}}`,
}

func TestValidAsJSONValid(t *testing.T) {
	t.Parallel()
	for _, c := range validCases {
		if got, want := jsontext.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid %v", c, got, want)
		}
	}
	for _, depth := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", "{\"a\":"} {
			closer := map[string]string{"[": "]", "{\"a\":": "}"}[open]
			c := strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth)
			if got, want := jsontext.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
				t.Errorf("%s nested %d deep: Valid %v, json.Valid %v", open, depth, got, want)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsontext.Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}

// BenchmarkValid: a message as a run appends it (1 KB of text).
func BenchmarkValid(b *testing.B) {
	msg, _ := json.Marshal(map[string]any{"role": "user", "text": strings.Repeat("echo hello world && ls -l /tmp; ", 32), "run_id": "r1"})
	b.Run("jsontext", func(b *testing.B) {
		for range b.N {
			jsontext.Valid(msg)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for range b.N {
			json.Valid(msg)
		}
	})
}
