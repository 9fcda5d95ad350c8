//go:build unix

// Command stdioserver serves the mcptest tools over stdio, for the tests of
// the MCP gateway; build it with mcptest.BuildStdioServer. It is not for
// production.
//
// Beside the tools of mcptest.NewServer it has crash {}, which records the
// call and exits with status 3 before answering, hang {}, which blocks
// for good whatever the client does (and keeps the process alive after its
// stdin closes, so only a signal ends it), freeze {}, which records the
// call and then stops the whole process with SIGSTOP (a hung server that
// answers nothing, not even a ping, until it is killed), and env {name},
// which returns the value of the environment variable name ("" if unset)
// and records nothing. Environment:
//
//	MCPTEST_LEDGER=file          append each call that took effect to file, a JSON line each
//	MCPTEST_START_LOG=file       append "start <pid>" to file on each start
//	MCPTEST_EXIT_AFTER_START=1   exit with status 4 right after starting
//
// It logs to stderr only: stdout carries the protocol.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tollgate-ai/tollgate/internal/mcptest"
)

func main() {
	log.SetOutput(os.Stderr)
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("mcptest stdioserver[%d]: ", os.Getpid()))

	if path := os.Getenv(mcptest.EnvStartLog); path != "" {
		if err := appendLine(path, fmt.Sprintf("start %d", os.Getpid())); err != nil {
			log.Fatalf("start log: %v", err)
		}
	}
	if os.Getenv(mcptest.EnvExitAfterStart) == "1" {
		log.Printf("%s=1: exiting with status %d", mcptest.EnvExitAfterStart, mcptest.ExitAfterStartStatus)
		os.Exit(mcptest.ExitAfterStartStatus)
	}

	l := new(mcptest.Ledger)
	if path := os.Getenv(mcptest.EnvLedger); path != "" {
		var err error
		if l, err = mcptest.OpenLedgerFile(path); err != nil {
			log.Fatalf("ledger: %v", err)
		}
	}

	s := mcptest.NewServer(l, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "crash",
		Description: "Crashes the server.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := l.Record("crash", map[string]any{}); err != nil {
			log.Printf("crash: %v", err)
		}
		log.Printf("crash: exiting with status %d", mcptest.CrashStatus)
		os.Exit(mcptest.CrashStatus)
		return nil, nil, nil
	})
	var hung atomic.Bool
	mcp.AddTool(s, &mcp.Tool{
		Name:        "hang",
		Description: "Hangs the server.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		hung.Store(true)
		log.Print("hang: hanging for good")
		hangForever()
		return nil, nil, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "freeze",
		Description: "Freezes the server process (SIGSTOP).",
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := l.Record("freeze", map[string]any{}); err != nil {
			log.Printf("freeze: %v", err)
		}
		log.Print("freeze: stopping the process")
		// Stopped again whenever something continues it (under load the
		// tests saw the process run on milliseconds after its SIGSTOP):
		// a frozen server answers nothing, ever, until it is killed.
		for {
			if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
				return nil, nil, fmt.Errorf("freeze: %w", err)
			}
			time.Sleep(time.Millisecond)
		}
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "env",
		Description: "Returns an environment variable's value.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in envIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv(in.Name)}}}, nil, nil
	})

	log.Print("serving")
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	if hung.Load() {
		log.Print("session ended, but hung")
		hangForever()
	}
	if err != nil {
		// The client closing its end is how a session normally ends.
		log.Printf("session ended: %v", err)
		return
	}
	log.Print("session ended")
}

type envIn struct {
	Name string `json:"name" jsonschema:"the variable's name"`
}

// hangForever blocks for good, ignoring cancellation (a sleeping goroutine
// keeps the runtime from reporting a deadlock).
func hangForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
