// Package migrate reads the schema migrations a SQL store embeds:
// files named NNNN_description.sql in one directory, NNNN the schema
// version the file brings the database to, numbered from 1 with no gap.
// Each store applies them its own way (checkpoint/sqlite and
// checkpoint/postgres: migrate).
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one file: the version it brings the schema to, its file
// name (recorded in the store's schema_version table) and its SQL.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations in dir of fsys in version order. Its errors
// begin with store ("sqlite", "postgres"): a file whose name does not
// start with a version number, or a version missing from the sequence.
func Load(fsys fs.FS, dir, store string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: migration %q: name must start with a version number", store, e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("%s: migration %q: want version %d", store, m.Name, i+1)
		}
	}
	return out, nil
}
