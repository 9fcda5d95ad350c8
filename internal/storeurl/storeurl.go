// Package storeurl opens a checkpoint store named by a string, as the
// command line takes it: "memory", "sqlite:PATH" (or a path ending in .db),
// "postgres://..." / "postgresql://...".
package storeurl

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
	"github.com/tollgate-ai/tollgate/checkpoint/postgres"
	"github.com/tollgate-ai/tollgate/checkpoint/sqlite"
)

// Open opens the store that url names.
func Open(ctx context.Context, url string) (checkpoint.Store, error) {
	switch {
	case url == "memory":
		return memory.New(), nil
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
		if path == "" {
			return nil, fmt.Errorf("store %q: sqlite needs a path (sqlite:tollgate.db)", url)
		}
		return sqlite.Open(ctx, path, nil)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.Open(ctx, url, nil)
	case strings.HasSuffix(url, ".db") || strings.HasSuffix(url, ".sqlite"):
		return sqlite.Open(ctx, url, nil)
	}
	return nil, fmt.Errorf("store %q: want memory, sqlite:PATH or a postgres:// URL", url)
}
