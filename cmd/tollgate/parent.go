package main

import (
	"path/filepath"
	"strconv"
	"strings"
)

func init() {
	// Before anything runs: see dieWithParentGoRun.
	dieWithParentGoRun()
}

func itoa(n int) string { return strconv.Itoa(n) }

// isGoCommand reports whether exe is the go command's binary.
func isGoCommand(exe string) bool {
	base := strings.TrimSuffix(filepath.Base(exe), ".exe")
	return base == "go"
}
