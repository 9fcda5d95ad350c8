// Package mcptest provides MCP servers for the tests of the MCP gateway
// (mcpgate): an in-process server, [NewServer], and a stdio server program,
// built by [BuildStdioServer], that serve the same small set of tools.
//
// Each tool stands for a kind of tool the gateway must handle: a read-only
// one (echo), additive and destructive ones (write_note, delete_repo), a
// slow one that reports progress (slow), one with structured output
// (structured), one that fails (fail), one whose input schema is malformed
// (bad_schema), and, on request, one that never returns (hang). The stdio
// program adds a tool that crashes the process (crash), one that freezes
// it whole with SIGSTOP (freeze: a hung server that answers not even a
// ping), one that reads its environment (env: what a server is given of
// tollgate's), and its environment can make it hang for good or refuse to
// start.
//
// A [Ledger] records every call that took effect, so a test can check
// exactly which calls reached the server: the in-process server records
// into the Ledger it is given, the stdio program into the JSON lines file
// named by MCPTEST_LEDGER, read back with [ReadLedger].
//
// This package is for tests only: its servers do nothing real, and they are
// not meant to run in production.
package mcptest
