package display

import (
	"encoding/json"
	"testing"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	hostileArgs, _ := json.Marshal(map[string]any{"cmd": hostile}) // stored the way agent/ stores it: HTML-escaped
	tests := []struct {
		name   string
		in     any
		want   string
		hidden int
	}{
		{"stored escapes undone", json.RawMessage(`{"cmd":"echo hi \u003e\u003e /etc/passwd \u0026\u0026 \u003cb\u003e"}`),
			`{"cmd":"echo hi >> /etc/passwd && <b>"}`, 0},
		{"hostile, as json.Marshal stored it", json.RawMessage(hostileArgs),
			`{"cmd":"echo \"<script>\" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m"}`, 4},
		{"hostile Go value", map[string]any{"cmd": hostile},
			`{"cmd":"echo \"<script>\" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m"}`, 4},
		{"raw bidi characters", []byte("{\"a\":\"x\u202ey\"}"), `{"a":"x⟨U+202E⟩y"}`, 1},
		{"string of JSON", ` [1, "a\u003e", true, null] `, `[1,"a>",true,null]`, 0},
		{"white space dropped, not inside strings", "{ \"a b\" : [ 1 , 2 ] }", `{"a b":[1,2]}`, 0},
		{"numbers digit for digit", json.RawMessage(`{"n":1.50,"big":12345678901234567890123,"e":1E+2}`),
			`{"n":1.50,"big":12345678901234567890123,"e":1E+2}`, 0},
		{"json.Number", map[string]any{"n": json.Number("1.50")}, `{"n":1.50}`, 0},
		{"escapes kept as escapes", json.RawMessage(`{"a":"q\"b\\s\/n\nt\t"}`), `{"a":"q\"b\\s/n\nt\t"}`, 0},
		{"controls as badges", json.RawMessage(`"\u0000\b\f\r\u001b\u007f\u0085"`),
			`"⟨U+0000⟩⟨U+0008⟩⟨U+000C⟩⟨U+000D⟩⟨U+001B⟩⟨U+007F⟩⟨U+0085⟩"`, 7},
		{"escaped invisible characters", json.RawMessage(`{"\u200bkey":"\u2066\u2069\ufeff"}`),
			`{"⟨U+200B⟩key":"⟨U+2066⟩⟨U+2069⟩⟨U+FEFF⟩"}`, 4},
		{"surrogate pair", json.RawMessage(`"\ud83d\ude00 \udb40\udc41"`), `"😀 ⟨U+E0041⟩"`, 1},
		{"lone surrogates", json.RawMessage(`["\ud800","\udc00x","\ud800\u0041","\ud800\ud800"]`),
			`["⟨U+D800⟩","⟨U+DC00⟩x","⟨U+D800⟩A","⟨U+D800⟩⟨U+D800⟩"]`, 5},
		{"invalid UTF-8 in a string", []byte("[\"a\xffb\"]"), `["a⟨0xFF⟩b"]`, 1},
		{"invalid JSON shown as text", json.RawMessage("{\"a\": \u202e"), "{\"a\": ⟨U+202E⟩", 1},
		{"not JSON at all", "rm -rf / \x1b[0m", "rm -rf / ⟨U+001B⟩[0m", 1},
		{"empty", json.RawMessage(nil), "", 0},
		{"nil value", nil, "null", 0},
		{"unencodable value", map[string]any{"f": func() {}}, "(cannot be shown as JSON: json: unsupported type: func())", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := JSON(tt.in); got != tt.want {
				t.Errorf("JSON(%v) =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
			if got := HiddenJSON(tt.in); got != tt.hidden {
				t.Errorf("HiddenJSON(%v) = %d, want %d", tt.in, got, tt.hidden)
			}
		})
	}
}

func TestJSONIndent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"object", json.RawMessage(`{"cmd":"a \u003e b\nc","args":[1,{}],"e":[]}`),
			"{\n  \"cmd\": \"a > b\\nc\",\n  \"args\": [\n    1,\n    {}\n  ],\n  \"e\": []\n}"},
		{"scalar", json.RawMessage(`"\u003c"`), `"<"`},
		{"invalid", "{\n\t\"a\u200b", "{\n\t\"a⟨U+200B⟩"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := JSONIndent(tt.in); got != tt.want {
				t.Errorf("JSONIndent(%v) =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
		})
	}
}

func TestEditJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
		ok   bool
	}{
		{"hostile command", map[string]any{"cmd": hostile},
			"{\n  \"cmd\": \"echo \\\"<script>\\\" >> /etc/passwd # \\u202eevil\\u202c \\u200b \\u001b[31m\"\n}", true},
		{"stored escapes undone", json.RawMessage(`{"cmd":"a \u003e b \u0026 c","n":1.50}`), "{\n  \"cmd\": \"a > b & c\",\n  \"n\": 1.50\n}", true},
		{"beyond U+FFFF as a pair", json.RawMessage(`"\udb40\udc41😀"`), `"\udb40\udc41😀"`, true},
		{"lone surrogate kept", json.RawMessage(`"\ud800"`), `"\ud800"`, true},
		{"controls", json.RawMessage(`"a\r\nb\u0000"`), `"a\u000d\nb\u0000"`, true},
		{"invalid UTF-8", []byte("\"a\xffb\""), `"a\ufffdb"`, true},
		{"not JSON", "{", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := EditJSON(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("EditJSON(%v) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}
