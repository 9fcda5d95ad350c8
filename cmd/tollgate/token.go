package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/tollgate-ai/tollgate/server"
)

func init() {
	register("token", "make an API token for tollgate serve", nil,
		subcommand{name: "new", summary: "make a token: its secret, and the entry of a tokens file", run: tokenNew})
}

const tokenNewHelp = `usage: tollgate token new --name NAME --role client|reviewer|admin [--threads 'GLOB,...'] [--secret-file FILE]

Prints a new token's secret on stderr (give it to its holder: it is shown
once), or writes it to --secret-file (made 0600; an existing file is not
overwritten), and, on stdout, the entry for a tokens file, which keeps
only the secret's SHA-256. Roles: client (starts and drives runs: threads,
messages, aborts), reviewer (answers questions), admin (everything).

examples:
  echo 'tokens:' > tokens.yaml
  tollgate token new --name alice --role reviewer >> tokens.yaml
  tollgate token new --name team-a --role reviewer --threads 'team-a-*,shared' >> tokens.yaml
  tollgate token new --name ci --role client >> tokens.yaml
  tollgate token new --name claude --role client --secret-file ~/.config/tollgate/hook.token >> tokens.yaml
  tollgate serve --tokens tokens.yaml
`

func tokenNew(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("token new", tokenNewHelp, stderr)
	name := fs.String("name", "", "who holds the token; recorded with every answer given with it")
	role := fs.String("role", "", "client (threads and messages), reviewer (questions and answers) or admin")
	threads := fs.String("threads", "", "reviewer only: comma-separated thread id `patterns` it may see (default: all)")
	secretFile := fs.String("secret-file", "", "write the secret to this `file` (made 0600, never overwritten) instead of stderr: for a program that reads it, such as a coding agent's hook")
	if code, done := parseFlagsOnly(fs, args, stdout); done {
		return code
	}
	if *name == "" || *role == "" {
		return fs.usageError("--name and --role are required")
	}
	switch server.Role(*role) {
	case server.RoleClient, server.RoleReviewer, server.RoleAdmin:
	default:
		return fs.usageError("--role %q: want client, reviewer or admin", *role)
	}
	secret := server.NewToken()
	tok := server.Token{Name: *name, Role: server.Role(*role), SHA256: server.HashToken(secret)}
	if *threads != "" {
		for _, p := range strings.Split(*threads, ",") {
			tok.Threads = append(tok.Threads, strings.TrimSpace(p))
		}
	}
	// Checked as the server will check it when it loads the file.
	entry := fmt.Sprintf("  - {name: %s, role: %s, token_sha256: %s", strconv.Quote(tok.Name), strconv.Quote(string(tok.Role)), tok.SHA256)
	if len(tok.Threads) > 0 {
		quoted := make([]string, len(tok.Threads))
		for i, p := range tok.Threads {
			quoted[i] = strconv.Quote(p)
		}
		entry += ", threads: [" + strings.Join(quoted, ", ") + "]"
	}
	entry += "}\n"
	if _, err := server.ParseTokensFileData("token new", []byte("tokens:\n"+entry)); err != nil {
		// "token new:2: entry 1 (NAME): why": only why is about the flags.
		msg := err.Error()
		if _, why, ok := strings.Cut(msg, "): "); ok {
			msg = why
		}
		fmt.Fprintln(stderr, "tollgate token new:", msg)
		return 2
	}
	if *secretFile != "" {
		path, err := expandHome(*secretFile)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate token new:", err)
			return 1
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate token new: --secret-file: %v (an existing file is not overwritten: a token in use would stop working)\n", err)
			return 1
		}
		_, err = fmt.Fprintln(f, secret)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			fmt.Fprintln(stderr, "tollgate token new: --secret-file:", err)
			return 1
		}
		fmt.Fprintf(stderr, "token for %s (%s) written to %s\n", tok.Name, tok.Role, path)
		fmt.Fprint(stdout, entry)
		return 0
	}
	// The secret alone on the last line, for a script to take:
	// tollgate token new ... 2>&1 >>tokens.yaml | tail -1
	fmt.Fprintf(stderr, "token for %s (%s), shown once:\n%s\n", tok.Name, tok.Role, secret)
	fmt.Fprint(stdout, entry)
	return 0
}
