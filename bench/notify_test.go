//go:build linux

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestNotifyCommand(t *testing.T) {
	for _, store := range []string{"memory", "sqlite"} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"notify", "-store", store, "-n", "5"}, &out, &errb); err != nil {
			t.Fatalf("%s: %v\n%s", store, err, errb.String())
		}
		if !strings.Contains(out.String(), "through the notifier") || !strings.Contains(out.String(), "a direct signed POST") {
			t.Errorf("%s: %s", store, out.String())
		}
	}
}
