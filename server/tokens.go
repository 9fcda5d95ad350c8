package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Role says what a token may do.
type Role string

const (
	// RoleClient starts and drives runs: threads, messages, abort,
	// resume, and reading and streaming threads.
	RoleClient Role = "client"
	// RoleReviewer answers questions: the queue, questions, answers, and
	// reading and streaming the threads it may see.
	RoleReviewer Role = "reviewer"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
)

// Token is one API token as the server keeps it: its name, its role and
// the SHA-256 of its secret, never the secret itself.
type Token struct {
	// Name identifies the holder: every answer given with the token is
	// recorded as by Name. Letters, digits and . _ @ + - (at most 64);
	// "dev", "timeout" and "abort" are taken by the runtime.
	Name string
	Role Role
	// SHA256 is the lowercase hex SHA-256 of the secret ([HashToken]).
	SHA256 string
	// Threads limits a reviewer to the threads whose id matches one of
	// these patterns ([path.Match]: '*' does not match '/'). Empty: every
	// thread. Only reviewers take it.
	Threads []string
}

// HashToken returns the lowercase hex SHA-256 of a token's secret, the
// form a tokens file's token_sha256 takes.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a new random secret (128 bits from crypto/rand) for a
// token: give it to its holder, and keep [HashToken] of it in the tokens
// file.
func NewToken() string { return "tg_" + rand.Text() }

// minSecret is the shortest plain secret accepted: shorter ones are
// guessable.
const minSecret = 16

var reservedNames = map[string]bool{"dev": true, "timeout": true, "abort": true}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune("._@+-", c):
		default:
			return false
		}
	}
	return true
}

// check reports what is wrong with t, if anything.
func (t Token) check() error {
	switch {
	case t.Name == "":
		return errors.New("the name is missing")
	case !validName(t.Name):
		return fmt.Errorf("name %q: use letters, digits and . _ @ + - (at most 64)", t.Name)
	case reservedNames[t.Name]:
		return fmt.Errorf("name %q is taken by the runtime (answers by %q mean something else)", t.Name, t.Name)
	}
	switch t.Role {
	case RoleClient, RoleReviewer, RoleAdmin:
	case "":
		return errors.New("the role is missing (client, reviewer or admin)")
	default:
		return fmt.Errorf("role %q is not client, reviewer or admin", t.Role)
	}
	if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
		return errors.New("the secret's SHA-256 must be 64 hex digits")
	}
	if len(t.Threads) > 0 && t.Role != RoleReviewer {
		return fmt.Errorf("only reviewers can be limited to threads (this token is %s)", t.Role)
	}
	for _, p := range t.Threads {
		if p == "" {
			return errors.New("an empty thread pattern")
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("thread pattern %q: %v", p, err)
		}
	}
	return nil
}

// tokenEntry is one entry of a tokens file.
type tokenEntry struct {
	Name        string   `yaml:"name"`
	Role        string   `yaml:"role"`
	Token       string   `yaml:"token"`
	TokenSHA256 string   `yaml:"token_sha256"`
	Threads     []string `yaml:"threads"`
}

// LoadTokens reads a tokens file:
//
//	tokens:
//	  - name: ci
//	    role: client
//	    token_sha256: 3f7a...   # HashToken of the secret
//	  - name: alice
//	    role: reviewer
//	    token: a-long-plain-secret   # hashed as it is read
//	    threads: ["team-a-*"]
//
// Each entry has either token_sha256 or token (at least 16 characters).
// An error names the file, line and entry at fault.
func LoadTokens(file string) ([]Token, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return ParseTokensFileData(file, data)
}

// ParseTokensFileData reads the text of a tokens file (see [LoadTokens]);
// name stands for the file in error messages.
func ParseTokensFileData(file string, data []byte) ([]Token, error) {
	at := func(n ast.Node) string {
		if n != nil {
			if tk := n.GetToken(); tk != nil && tk.Position != nil {
				return fmt.Sprintf("%s:%d", file, tk.Position.Line)
			}
		}
		return file
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
			return nil, fmt.Errorf("%s:%d: %s", file, ye.GetToken().Position.Line, ye.GetMessage())
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return nil, fmt.Errorf("%s: want one YAML document with a tokens list", file)
	}
	root, ok := f.Docs[0].Body.(*ast.MappingNode)
	if !ok {
		return nil, fmt.Errorf("%s: the top level must be a mapping with a tokens list", at(f.Docs[0].Body))
	}
	var list ast.Node
	for _, mv := range root.Values {
		switch k := mv.Key.GetToken().Value; k {
		case "tokens":
			list = mv.Value
		default:
			return nil, fmt.Errorf("%s: unknown key %q (the file has one key, tokens)", at(mv.Key), k)
		}
	}
	seq, ok := list.(*ast.SequenceNode)
	if !ok {
		return nil, fmt.Errorf("%s: tokens must be a list of {name, role, token_sha256 or token, threads}", file)
	}
	var out []Token
	for i, n := range seq.Values {
		var e tokenEntry
		where := fmt.Sprintf("%s: entry %d", at(n), i+1)
		if err := yaml.NodeToValue(n, &e, yaml.DisallowUnknownField()); err != nil {
			var ye yaml.Error
			if errors.As(err, &ye) {
				return nil, fmt.Errorf("%s: %s", where, ye.GetMessage())
			}
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if e.Name != "" {
			where += fmt.Sprintf(" (%s)", e.Name)
		}
		t := Token{Name: e.Name, Role: Role(e.Role), SHA256: strings.ToLower(e.TokenSHA256), Threads: e.Threads}
		switch {
		case e.Token != "" && e.TokenSHA256 != "":
			return nil, fmt.Errorf("%s: give token or token_sha256, not both", where)
		case e.Token == "" && e.TokenSHA256 == "":
			return nil, fmt.Errorf("%s: token_sha256 (or token) is missing", where)
		case e.Token != "":
			if len(e.Token) < minSecret {
				return nil, fmt.Errorf("%s: the token is shorter than %d characters", where, minSecret)
			}
			t.SHA256 = HashToken(e.Token)
		}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, t)
	}
	if err := checkUnique(out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// ParseTokensEnv reads tokens in the form of TOLLGATE_TOKENS:
// "name:role:secret,name:role:secret". The secret may hold ':' but not
// ','; thread limits need a tokens file. An error names the entry at
// fault, never its secret.
func ParseTokensEnv(s string) ([]Token, error) {
	var out []Token
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rest, ok1 := strings.Cut(item, ":")
		role, secret, ok2 := strings.Cut(rest, ":")
		where := fmt.Sprintf("TOLLGATE_TOKENS: entry %d", i+1)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: want name:role:token", where)
		}
		if name != "" {
			where += fmt.Sprintf(" (%s)", name)
		}
		if len(secret) < minSecret {
			return nil, fmt.Errorf("%s: the token is shorter than %d characters", where, minSecret)
		}
		t := Token{Name: name, Role: Role(role), SHA256: HashToken(secret)}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, t)
	}
	if err := checkUnique(out); err != nil {
		return nil, fmt.Errorf("TOLLGATE_TOKENS: %w", err)
	}
	return out, nil
}

// checkUnique refuses two tokens of one name (answers would not say who
// gave them) or one secret.
func checkUnique(tokens []Token) error {
	names, hashes := map[string]bool{}, map[string]string{}
	for _, t := range tokens {
		if names[t.Name] {
			return fmt.Errorf("two tokens are named %q", t.Name)
		}
		names[t.Name] = true
		h := strings.ToLower(t.SHA256)
		if other, dup := hashes[h]; dup {
			return fmt.Errorf("tokens %q and %q have the same secret", other, t.Name)
		}
		hashes[h] = t.Name
	}
	return nil
}
