//go:build linux

package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"
)

type parkedResult struct {
	Store  string `json:"store"`
	Parked int    `json:"parked"`
	// Seconds to prompt every run and see it park.
	Seconds          float64 `json:"seconds"`
	RSSBeforeKB      int64   `json:"rss_before_kb"`
	RSSAfterKB       int64   `json:"rss_after_kb"`
	GoroutinesBefore int     `json:"goroutines_before"`
	GoroutinesAfter  int     `json:"goroutines_after"`
	HeapBeforeKB     int64   `json:"heap_before_kb"`
	HeapAfterKB      int64   `json:"heap_after_kb"`
}

func settle() {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
}

func heapKB() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc / 1024)
}

// parked prompts k runs on one host, each of which asks and gets no
// answer, and measures the process before and after they park.
func parked(ctx context.Context, b *backend, k, loops int, wrap bool) (*parkedResult, error) {
	raw, err := b.openStore(ctx, pgConns(loops, 0))
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	store := raw
	if wrap {
		store = newCountingStore(raw)
	}
	ch, err := newCycleHost(ctx, store)
	if err != nil {
		return nil, err
	}
	defer ch.shutdown()
	res := &parkedResult{Store: b.label, Parked: k}
	settle()
	res.RSSBeforeKB, res.GoroutinesBefore, res.HeapBeforeKB = procStatusKB("VmRSS"), runtime.NumGoroutine(), heapKB()
	tag := "park-" + randomHex(4)
	prompt := cyclePrompt(1024)
	start := time.Now()
	err = eachOf(loops, k, func(i int) error {
		// Nobody waits for these threads: their questions stay
		// pending and the runs park.
		_, _, err := ch.h.Prompt(ctx, fmt.Sprintf("%s-%d", tag, i+1), prompt, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("parking runs: %w", err)
	}
	deadline := time.Now().Add(60*time.Second + time.Duration(k)*10*time.Millisecond)
	for ch.h.Stats().Parked < k {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d runs parked", ch.h.Stats().Parked, k)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.Seconds = time.Since(start).Seconds()
	if err := ch.waitQuiet(ctx); err != nil {
		return nil, err
	}
	settle()
	res.RSSAfterKB, res.GoroutinesAfter, res.HeapAfterKB = procStatusKB("VmRSS"), runtime.NumGoroutine(), heapKB()
	return res, nil
}
