package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tollgate-ai/tollgate/server"
)

func init() {
	register("token", "make an API token for tollgate serve", tokenCmd)
}

const tokenHelp = `usage: tollgate token new --name NAME --role client|reviewer|admin [--threads 'glob,glob']

Prints a new token's secret on stderr (give it to its holder: it is shown
once) and, on stdout, the entry for a tokens file, which keeps only the
secret's SHA-256:

  echo 'tokens:' > tokens.yaml
  tollgate token new --name alice --role reviewer >> tokens.yaml
  tollgate serve --tokens tokens.yaml

flags:
`

func tokenCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprint(stderr, tokenHelp)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("token new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tokenHelp); fs.PrintDefaults() }
	name := fs.String("name", "", "who holds the token; recorded with every answer given with it")
	role := fs.String("role", "", "client (threads and messages), reviewer (questions and answers) or admin")
	threads := fs.String("threads", "", "reviewer only: comma-separated thread id patterns it may see (default: all)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *name == "" || *role == "" {
		fmt.Fprintln(stderr, "tollgate token new: --name and --role are required")
		fs.Usage()
		return 2
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
		fmt.Fprintln(stderr, "tollgate token:", err)
		return 2
	}
	fmt.Fprintf(stderr, "token for %s (%s), shown once: %s\n", tok.Name, tok.Role, secret)
	fmt.Fprint(stdout, entry)
	return 0
}
