package hitl

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The payload's args text against encoding/json itself (no HTML escape)
// of the arguments decoded, for raw as encoding/json's json.Marshal writes it.
func stdNoHTML(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func checkArgsAsStd(t *testing.T, raw []byte) {
	t.Helper()
	for _, r := range [][]byte{raw, func() []byte {
		m, err := decodeArgs(raw)
		if err != nil || m == nil {
			return nil
		}
		b, _ := json.Marshal(m) // the real json.Marshal, not MarshalHTML
		return b
	}()} {
		if r == nil {
			continue
		}
		text, empty, ok := canonicalArgsText(r)
		if !ok {
			continue
		}
		m, err := decodeArgs(r)
		if err != nil {
			t.Fatalf("%q: taken, decode fails %v", r, err)
		}
		if empty {
			if len(m) != 0 {
				t.Fatalf("%q: empty but %v", r, m)
			}
			continue
		}
		if want := stdNoHTML(m); !bytes.Equal(text, want) {
			t.Fatalf("%q: text %q, encoding/json %q", r, text, want)
		}
		// and the raw really is json.Marshal's text of itself
		if std, _ := json.Marshal(m); !bytes.Equal(std, r) {
			t.Fatalf("%q: taken as canonical, json.Marshal gives %q", r, std)
		}
	}
}

func FuzzArgsTextAsStd(f *testing.F) {
	for _, c := range argsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkArgsAsStd(t, raw) })
}
