package storeurl_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-ai/tollgate/internal/storeurl"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, url := range []string{"memory", "sqlite:" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := storeurl.Open(context.Background(), url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		s.Close()
	}
	for _, url := range []string{"", "sqlite:", "mysql://x", "redis"} {
		if _, err := storeurl.Open(context.Background(), url); err == nil || !strings.Contains(err.Error(), "store") {
			t.Errorf("%q: err %v", url, err)
		}
	}
}
