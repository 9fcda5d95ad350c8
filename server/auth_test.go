package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/server"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestLoadTokens(t *testing.T) {
	t.Parallel()
	hash := server.HashToken("ci-secret-0123456789")
	file := writeFile(t, `# tokens of the test
tokens:
  - name: ci
    role: client
    token_sha256: `+strings.ToUpper(hash)+`
  - name: alice
    role: reviewer
    token: alice-secret-0123456789
    threads: ["team-a-*", "shared"]
  - {name: root, role: admin, token: root-secret-0123456789}
`)
	tokens, err := server.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 3 {
		t.Fatalf("%d tokens", len(tokens))
	}
	if c := tokens[0]; c.Name != "ci" || c.Role != server.RoleClient || c.SHA256 != hash {
		t.Errorf("ci: %+v", c)
	}
	if a := tokens[1]; a.SHA256 != server.HashToken("alice-secret-0123456789") || len(a.Threads) != 2 || a.Role != server.RoleReviewer {
		t.Errorf("alice: %+v", a)
	}
	for _, tk := range tokens {
		if strings.Contains(tk.SHA256, "secret") {
			t.Errorf("a plain secret is kept: %+v", tk)
		}
	}
}

func TestLoadTokensErrors(t *testing.T) {
	t.Parallel()
	good := "    token: a-long-enough-secret-1\n"
	for _, c := range []struct{ name, text, want string }{
		{"syntax", "tokens: [\n", "tokens.yaml:"},
		{"empty", "", "one YAML document"},
		{"not a mapping", "- a\n", "top level must be a mapping"},
		{"unknown key", "tokenz: []\n", `tokens.yaml:1: unknown key "tokenz"`},
		{"not a list", "tokens: 3\n", "tokens must be a list"},
		{"unknown field", "tokens:\n  - name: a\n    role: admin\n" + good + "    colour: red\n", `entry 1: `},
		{"bad role", "tokens:\n  - name: ok\n    role: client\n" + good + "  - name: bob\n    role: reviwer\n    token: another-long-secret-2\n", `tokens.yaml:5: entry 2 (bob): role "reviwer" is not client, reviewer or admin`},
		{"no role", "tokens:\n  - name: a\n" + good, "role is missing"},
		{"no name", "tokens:\n  - role: admin\n" + good, "name is missing"},
		{"bad name", "tokens:\n  - name: a b\n    role: admin\n" + good, `name "a b"`},
		{"reserved name", "tokens:\n  - name: timeout\n    role: reviewer\n" + good, "taken by the runtime"},
		{"both secrets", "tokens:\n  - name: a\n    role: admin\n" + good + "    token_sha256: " + server.HashToken("x") + "\n", "not both"},
		{"no secret", "tokens:\n  - name: a\n    role: admin\n", "token_sha256 (or token) is missing"},
		{"short secret", "tokens:\n  - name: a\n    role: admin\n    token: short\n", "shorter than 16"},
		{"bad hash", "tokens:\n  - name: a\n    role: admin\n    token_sha256: abc\n", "64 hex digits"},
		{"threads on a client", "tokens:\n  - name: a\n    role: client\n" + good + "    threads: [x]\n", "only reviewers"},
		{"bad pattern", "tokens:\n  - name: a\n    role: reviewer\n" + good + "    threads: [\"[\"]\n", `thread pattern "["`},
		{"same name", "tokens:\n  - {name: a, role: admin, token: secret-number-one-1}\n  - {name: a, role: client, token: secret-number-two-2}\n", `two tokens are named "a"`},
		{"same secret", "tokens:\n  - {name: a, role: admin, token: secret-number-one-1}\n  - {name: b, role: client, token: secret-number-one-1}\n", "same secret"},
	} {
		_, err := server.LoadTokens(writeFile(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "a-long-enough-secret-1") {
			t.Errorf("%s: the error shows the secret: %v", c.name, err)
		}
	}
	if _, err := server.LoadTokens(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestParseTokensEnv(t *testing.T) {
	t.Parallel()
	tokens, err := server.ParseTokensEnv(" ci:client:secret:with:colons-123 , root:admin:root-secret-0123456789,")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].SHA256 != server.HashToken("secret:with:colons-123") || tokens[1].Role != server.RoleAdmin {
		t.Errorf("tokens %+v", tokens)
	}
	for _, c := range []struct{ in, want string }{
		{"ci:client", "entry 1: want name:role:token"},
		{"ok:admin:root-secret-0123456789,ci:boss:client-secret-0123456789", `entry 2 (ci): role "boss"`},
		{"ci:client:short", "shorter than 16"},
		{"a:admin:root-secret-0123456789,a:client:client-secret-0123456789", "two tokens are named"},
	} {
		_, err := server.ParseTokensEnv(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-0123456789") {
			t.Errorf("%q: the error shows the secret: %v", c.in, err)
		}
	}
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	a, b := server.NewToken(), server.NewToken()
	if a == b || !strings.HasPrefix(a, "tg_") || len(a) < 16+3 {
		t.Errorf("tokens %q %q", a, b)
	}
	if h := server.HashToken("abc"); h != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashToken(abc) = %s", h)
	}
	// A token made by NewToken works as a bearer token.
	if _, err := server.ParseTokensEnv("x:client:" + a); err != nil {
		t.Error(err)
	}
}
