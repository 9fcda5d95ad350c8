package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// canonicalArgsBefore is canonicalArgs as it was before arguments already
// canonical were kept as they are: decoded, then encoded.
func canonicalArgsBefore(raw json.RawMessage) json.RawMessage {
	obj, p := decodeObject(raw)
	if p != nil {
		return raw
	}
	return encodeCanonical(obj, raw)
}

// canonicalArgsCases are arguments of every kind, hostile text among
// them: canonicalArgs must give each the bytes it gave before.
var canonicalArgsCases = []string{
	``, ` `, `{}`, ` {} `, `[]`, `"x"`, `1`, `null`, `{`, `{"a":1}{}`, `{"a":1} x`,
	`{"text":"hi"}`, `{"text": "hi"}`, `{"path":"/tmp/n","text":"hello"}`, `{"text":"hello","path":"/tmp/n"}`,
	`{"cmd":"echo hi # not a comment \\ \" ' $(x) ` + "`y`" + `"}`,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":[2]}}`, `{"b":1,"a":{"d":1,"c":2}}`,
	`{"n":-0,"o":1e400,"p":1.5E-7,"q":123456789012345678901234567890123456789,"r":0.10}`,
	`{"n":01}`, `{"n":1.}`, `{"n":+1}`, `{"n":NaN}`,
	`{"s":"<b> & </b>"}`, `{"s":"\u003cb\u003e"}`, `{"s":"\u003Cb\u003E"}`, `{"s":"\/"}`, `{"s":"\u0041"}`,
	`{"s":"\b\f\n\r\t\u0000\u001f"}`, `{"s":"\u0008\u000C"}`, `{"s":"\u007f"}`,
	"{\"s\":\"\u2028\u2029\"}", `{"s":"\u2028\u2029"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\ud800"}`, `{"s":"\ufffd"}`,
	"{\"s\":\"\xff\xfe bad\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"\xff\":1}", "{\"\u00e9\":1,\"e\":2}", "{\"e\":2,\"\u00e9\":1}",
	`{"\u0061":1,"a":2}`, `{"a\"b":1}`, `{"<":1,"&":2}`, `{"":0,"#":1}`,
	"{\"s\":\"tab\tinside\"}",
	strings.Repeat(`{"a":`, 999) + `1` + strings.Repeat(`}`, 999),
	strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat(`}`, 1001),
	`{"a":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
}

func TestCanonicalArgsAsBefore(t *testing.T) {
	for _, c := range canonicalArgsCases {
		checkCanonicalArgsAsBefore(t, []byte(c))
	}
}

// Already canonical arguments are kept, not encoded again.
func TestCanonicalArgsKeepsCanonical(t *testing.T) {
	raw := json.RawMessage(`{"path":"/tmp/n","text":"\u003cb\u003e"}`)
	got := canonicalArgs(raw)
	if string(got) != string(raw) || &got[0] != &raw[0] {
		t.Fatalf("canonicalArgs(%s) = %s, not the arguments themselves", raw, got)
	}
	if n := testing.AllocsPerRun(10, func() { canonicalArgs(raw) }); n != 0 {
		t.Errorf("canonicalArgs of canonical arguments: %v allocations, want 0", n)
	}
}

// canonicalArgs, and the digests over it, give any text the bytes they
// gave before.
func FuzzCanonicalArgsAsBefore(f *testing.F) {
	for _, c := range canonicalArgsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkCanonicalArgsAsBefore(t, raw)
	})
}

// callDigestBefore is callDigestCanonical as it was before it hashed
// from the stack: the bytes CallDigest's comment says it hashes.
func callDigestBefore(threadID, callID, tool string, canonical json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(callDigestTag))
	for _, f := range []string{threadID, callID, tool} {
		h.Write(strconv.AppendInt(nil, int64(len(f)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	h.Write(canonical)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// The call digest is the same bytes for any ids and arguments, either side
// of the size hashed from the stack.
func FuzzCallDigestAsBefore(f *testing.F) {
	f.Add("mcp-0123456789abcdef01", "call_1", "mcp__srv__echo", []byte(`{"text":"hi"}`))
	f.Add("", "", "", []byte(``))
	f.Add("t", "c", "x", bytes.Repeat([]byte("a"), 470))
	f.Add(strings.Repeat("é", 200), "c", "tool", []byte(`{"a":"`+strings.Repeat("b", 400)+`"}`))
	f.Fuzz(func(t *testing.T, thread, call, tool string, args []byte) {
		if got, want := callDigestCanonical(thread, call, tool, args), callDigestBefore(thread, call, tool, args); got != want {
			t.Fatalf("callDigestCanonical(%q, %q, %q, %q) = %s, before %s", thread, call, tool, args, got, want)
		}
	})
}

func TestCallDigestAsBeforeAtEverySize(t *testing.T) {
	for n := 0; n <= 600; n++ {
		args := bytes.Repeat([]byte("x"), n)
		if got, want := callDigestCanonical("mcp-thread", "call_1", "mcp__srv__echo", args), callDigestBefore("mcp-thread", "call_1", "mcp__srv__echo", args); got != want {
			t.Fatalf("%d bytes of arguments: %s, before %s", n, got, want)
		}
	}
	args := json.RawMessage(`{"text":"hi"}`)
	if n := testing.AllocsPerRun(10, func() { callDigestCanonical("mcp-thread", "call_1", "mcp__srv__echo", args) }); n > 1 {
		t.Errorf("callDigestCanonical: %v allocations, want 1 (the digest)", n)
	}
}

func checkCanonicalArgsAsBefore(t *testing.T, raw []byte) {
	t.Helper()
	before := canonicalArgsBefore(bytes.Clone(raw))
	if got := canonicalArgs(raw); !bytes.Equal(got, before) {
		t.Fatalf("canonicalArgs(%q) = %q, before %q", raw, got, before)
	}
	if got, want := CallDigest("t", "c", "tool", raw), callDigestBefore("t", "c", "tool", before); got != want {
		t.Fatalf("CallDigest of %q: %s, before %s", raw, got, want)
	}
	if got, want := ArgsDigest("tool", raw), digestCanonical("tool", before); got != want {
		t.Fatalf("ArgsDigest of %q: %s, before %s", raw, got, want)
	}
}
