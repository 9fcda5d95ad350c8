package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/internal/storeurl"
)

// defaultStore is where tollgate serve keeps its store when neither
// --store nor TOLLGATE_STORE says otherwise: a file in the user's state
// directory ($XDG_STATE_HOME/tollgate, else ~/.local/state/tollgate),
// never the directory serve starts in — that is where the bash tool works
// by default, and a store a tool can write is a store a tool can answer
// (issue 21's attack B: one approved sqlite3 UPDATE approved another
// pending call).
func defaultStore() string { return "sqlite:" + stateFile("tollgate.db") }

// gatewayStore is the default store of tollgate mcp-gateway.
func gatewayStore() string { return "sqlite:" + stateFile("gateway.db") }

// stateFile names a file in tollgate's state directory:
// $XDG_STATE_HOME/tollgate, else ~/.local/state/tollgate (~/ is
// expanded where the file is opened, and shown as ~ in help).
func stateFile(name string) string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "tollgate", name)
	}
	return "~/.local/state/tollgate/" + name
}

// configFile names a file in tollgate's configuration directory:
// $XDG_CONFIG_HOME/tollgate, else ~/.config/tollgate.
func configFile(name string) string {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "tollgate", name)
	}
	return "~/.config/tollgate/" + name
}

// expandHome makes a leading ~/ the home directory.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s: ~ is your home directory, which is not known here (%v): give the full path", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

// ensureStoreDir makes the directory of a default store (0700: the store
// is the user's alone) when url is one of defaults. Another store's
// directory is the user's to make: a missing one is an error that says so.
func ensureStoreDir(url string, defaults ...string) error {
	if !slices.Contains(defaults, url) {
		return nil
	}
	path, err := storeurl.SQLitePath(url)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("making the store's directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("making the store's directory: %w", err)
	}
	return nil
}

// storeFlag defines --store, the store a command uses; its default is
// $TOLLGATE_STORE, else def: defaultStore() for serve and for the commands
// that read what serve wrote, "memory" for run. Open what it names with
// storeurl.Open in a command that creates the store, with
// storeurl.OpenReadOnly in one that only reads (it never writes, nor
// migrates), and with storeurl.OpenExisting in one that answers or
// aborts.
func storeFlag(fs flagDefiner, def string) *string {
	kinds := "sqlite:PATH or postgres://USER@HOST/DB"
	if def == "memory" {
		kinds = "memory (nothing is kept), " + kinds
	}
	p := new(string)
	fs.StringVar(p, "store", envDefault("TOLLGATE_STORE", def),
		"the store `URL`, where threads and questions live: "+kinds+", e.g. --store sqlite:tollgate.db or --store postgres://tollgate@db.internal/tollgate [TOLLGATE_STORE]")
	return p
}

// statePaths are the files of tollgate's own state that a command of the
// bash tool must not see: the SQLite store with its journal files, the
// policy and the tokens files (those of them that are files). They are
// masked from confined commands' view of the machine.
func statePaths(storeURL string, files ...string) []string {
	var out []string
	add := func(p string) {
		if p == "" || p == "builtin" {
			return
		}
		p, _ = expandHome(p)
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	if path, err := storeurl.SQLitePath(storeURL); err == nil {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			add(path + suffix)
		}
		if storeURL == defaultStore() || storeURL == gatewayStore() {
			add(filepath.Dir(path)) // the whole state directory
		}
	}
	for _, f := range files {
		add(f)
	}
	return out
}

// storePasswordRefusal says why a --store URL with a password is refused.
const storePasswordRefusal = "--store carries a password, which every process on this machine can read in its command line: give it in PGPASSWORD or a password file (~/.pgpass, or PGPASSFILE), or the whole URL in TOLLGATE_STORE"

// storePassword refuses (exit status 2) a --store given on the command
// line with a password in it (storePasswordRefusal).
func storePassword(fs *flagSet, url string) error {
	if given(fs, "store") && storeurl.HasPassword(url) {
		return withCode(2, errors.New(storePasswordRefusal))
	}
	return nil
}

// stateInside returns the first of paths inside dir (or dir itself), or "".
func stateInside(dir string, paths []string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	for _, p := range paths {
		q := p
		if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			q = filepath.Join(r, filepath.Base(p))
		}
		if rel, err := filepath.Rel(d, q); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return p
		}
	}
	return ""
}

// openStore opens the store a serving command keeps its state in (serve,
// run, mcp-gateway, by wiring.openStore): its directory is made first
// when it is a default one (ensureStoreDir).
func openStore(ctx context.Context, url string, defaults ...string) (checkpoint.Store, error) {
	if err := ensureStoreDir(url, defaults...); err != nil {
		return nil, err
	}
	return storeurl.Open(ctx, url)
}
