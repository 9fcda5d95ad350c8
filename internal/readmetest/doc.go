// Package readmetest keeps README.md true: its test runs every command the
// README shows against a freshly built tollgate, and checks that the Go
// program it shows is the one in examples/quickstart. The conventions the
// README follows for it are at the top of readme_test.go.
package readmetest
