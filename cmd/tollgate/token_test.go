package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/server"
)

// The secret is alone on stderr's last line (a script takes it with
// tail -1), and the entry on stdout holds only its hash, which the
// server's parser accepts.
func TestTokenNew(t *testing.T) {
	code, out, errOut := runCLI(t, "", "token", "new", "--name", "alice", "--role", "reviewer", "--threads", "team-a-*, shared")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	secret := lines[len(lines)-1]
	if !strings.HasPrefix(secret, "tg_") || strings.Contains(secret, " ") {
		t.Fatalf("the last line of stderr is %q, want the secret alone", secret)
	}
	if strings.Contains(out, secret) || !strings.Contains(out, server.HashToken(secret)) {
		t.Fatalf("the entry must hold the hash, never the secret:\n%s", out)
	}
	toks, err := server.ParseTokensFileData("tokens.yaml", []byte("tokens:\n"+out))
	if err != nil || len(toks) != 1 {
		t.Fatalf("the entry does not parse: %v %v", toks, err)
	}
	if code, _, errOut := runCLI(t, "", "token", "new", "--name", "x", "--role", "root"); code != 2 || !strings.Contains(errOut, `--role "root": want client, reviewer or admin`) {
		t.Fatalf("bad role: %d %s", code, errOut)
	}
}

func TestTokenSecretFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hook.token")
	code, out, errOut := runCLI(t, "", "token", "new", "--name", "claude", "--role", "client", "--secret-file", file)
	if code != 0 || !strings.Contains(errOut, "written to "+file) || strings.Contains(errOut, "tg_") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	raw, _ := os.ReadFile(file)
	secret := strings.TrimSpace(string(raw))
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 || !strings.Contains(out, server.HashToken(secret)) {
		t.Errorf("the file (%v) does not hold the entry's secret:\n%s", st.Mode(), out)
	}
	if code, _, errOut := runCLI(t, "", "token", "new", "--name", "x", "--role", "client", "--secret-file", file); code != 1 || !strings.Contains(errOut, "not overwritten") {
		t.Errorf("an existing file: %d %s", code, errOut)
	}
}
