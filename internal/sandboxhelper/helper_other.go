//go:build !linux

package sandboxhelper

// Main does nothing off Linux: there is no sandbox helper there.
func Main() {}
