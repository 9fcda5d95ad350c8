package checkpointtest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func testThreads(t *testing.T, setup setupFunc) {
	t.Run("CreateLoad", func(t *testing.T) { testThreadsCreateLoad(t, setup) })

	t.Run("CreateFillsCreatedAt", func(t *testing.T) { testThreadsCreateFillsCreatedAt(t, setup) })

	t.Run("CreateDuplicate", func(t *testing.T) { testThreadsCreateDuplicate(t, setup) })

	t.Run("LoadNotFound", func(t *testing.T) { testThreadsLoadNotFound(t, setup) })

	t.Run("Save", func(t *testing.T) { testThreadsSave(t, setup) })

	t.Run("SaveStale", func(t *testing.T) { testThreadsSaveStale(t, setup) })

	t.Run("SaveNotFound", func(t *testing.T) { testThreadsSaveNotFound(t, setup) })

	t.Run("NoAliasing", func(t *testing.T) { testThreadsNoAliasing(t, setup) })

	t.Run("Isolated", func(t *testing.T) { testThreadsIsolated(t, setup) })
}

func testThreadsCreateLoad(t *testing.T, setup setupFunc) {
	s := setup(t)
	th := &checkpoint.Thread{
		ID:        id("thread"),
		Status:    checkpoint.ThreadIdle,
		RunID:     "run-1",
		Messages:  json.RawMessage(`[{"role":"user", "content":"hi"}]`),
		CreatedAt: t0,
	}
	mustCreateThread(t, s, th)
	if th.Version != 1 {
		t.Errorf("Version after CreateThread = %d, want 1", th.Version)
	}
	if th.UpdatedAt.IsZero() {
		t.Errorf("UpdatedAt not set by CreateThread")
	}
	got, err := s.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("LoadThread: %v", err)
	}
	if got.ID != th.ID || got.Version != 1 || got.Status != th.Status || got.RunID != th.RunID {
		t.Errorf("LoadThread = %+v, want %+v", got, th)
	}
	checkJSON(t, "Messages", got.Messages, th.Messages)
	checkTime(t, "CreatedAt (given)", got.CreatedAt, t0)
	checkTime(t, "UpdatedAt", got.UpdatedAt, th.UpdatedAt)
}

func testThreadsCreateFillsCreatedAt(t *testing.T, setup setupFunc) {
	s := setup(t)
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Status: checkpoint.ThreadIdle})
	got, err := s.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("LoadThread: %v", err)
	}
	if !recent(got.CreatedAt) || !recent(got.UpdatedAt) {
		t.Errorf("CreatedAt %v, UpdatedAt %v: want the store's current time", got.CreatedAt, got.UpdatedAt)
	}
	if string(got.Messages) != "[]" {
		t.Errorf("Messages = %q, want [] (none)", got.Messages)
	}
}

func testThreadsCreateDuplicate(t *testing.T, setup setupFunc) {
	s := setup(t)
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Messages: json.RawMessage(`[1]`)})
	err := s.CreateThread(ctx(t), &checkpoint.Thread{ID: th.ID, Messages: json.RawMessage(`[2]`)})
	if !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("second CreateThread = %v, want ErrConflict", err)
	}
	got, err := s.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("LoadThread: %v", err)
	}
	checkJSON(t, "Messages after a refused create", got.Messages, json.RawMessage(`[1]`))
}

func testThreadsLoadNotFound(t *testing.T, setup setupFunc) {
	s := setup(t)
	_, err := s.LoadThread(ctx(t), id("missing"))
	if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("LoadThread(missing) = %v, want ErrNotFound", err)
	}
}

func testThreadsSave(t *testing.T, setup setupFunc) {
	s := setup(t)
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Status: checkpoint.ThreadIdle, CreatedAt: t0})
	loaded, err := s.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("LoadThread: %v", err)
	}
	loaded.Status = checkpoint.ThreadRunning
	loaded.RunID = "run-2"
	loaded.Messages = json.RawMessage(`[{"role":"user","content":"go"},  {"role":"assistant"}]`)
	loaded.CreatedAt = t0.Add(99 * 3600e9) // ignored: creation time is the store's
	if err := s.SaveThread(ctx(t), loaded); err != nil {
		t.Fatalf("SaveThread: %v", err)
	}
	if loaded.Version != 2 {
		t.Errorf("Version after SaveThread = %d, want 2", loaded.Version)
	}
	got, err := s.LoadThread(ctx(t), th.ID)
	if err != nil {
		t.Fatalf("LoadThread: %v", err)
	}
	if got.Version != 2 || got.Status != checkpoint.ThreadRunning || got.RunID != "run-2" {
		t.Errorf("after save: %+v", got)
	}
	// Each message byte for byte; the spacing between them is not kept.
	checkJSON(t, "Messages", got.Messages, json.RawMessage(`[{"role":"user","content":"go"},{"role":"assistant"}]`))
	checkTime(t, "CreatedAt", got.CreatedAt, t0)
	checkTime(t, "returned CreatedAt", loaded.CreatedAt, t0)
	if !recent(got.UpdatedAt) {
		t.Errorf("UpdatedAt = %v, want the store's current time", got.UpdatedAt)
	}

	// And again: versions keep counting.
	got.Messages = json.RawMessage(`[]`)
	if err := s.SaveThread(ctx(t), got); err != nil {
		t.Fatalf("second SaveThread: %v", err)
	}
	if got.Version != 3 {
		t.Errorf("Version after second SaveThread = %d, want 3", got.Version)
	}
}

func testThreadsSaveStale(t *testing.T, setup setupFunc) {
	s := setup(t)
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Messages: json.RawMessage(`["v1"]`)})
	first, _ := s.LoadThread(ctx(t), th.ID)
	second, _ := s.LoadThread(ctx(t), th.ID)
	first.Messages = json.RawMessage(`["first"]`)
	if err := s.SaveThread(ctx(t), first); err != nil {
		t.Fatalf("SaveThread(first): %v", err)
	}
	second.Messages = json.RawMessage(`["second"]`)
	err := s.SaveThread(ctx(t), second)
	if !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("SaveThread(stale) = %v, want ErrConflict", err)
	}
	if second.Version != 1 {
		t.Errorf("a refused save changed Version to %d", second.Version)
	}
	got, _ := s.LoadThread(ctx(t), th.ID)
	if got.Version != 2 {
		t.Errorf("Version = %d, want 2", got.Version)
	}
	checkJSON(t, "Messages after a stale save", got.Messages, json.RawMessage(`["first"]`))

	// A version from the future is as stale as one from the past.
	got.Version = 7
	if err := s.SaveThread(ctx(t), got); !errors.Is(err, checkpoint.ErrConflict) {
		t.Fatalf("SaveThread(version 7 of 2) = %v, want ErrConflict", err)
	}
}

func testThreadsSaveNotFound(t *testing.T, setup setupFunc) {
	s := setup(t)
	err := s.SaveThread(ctx(t), &checkpoint.Thread{ID: id("missing"), Version: 1})
	if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("SaveThread(missing) = %v, want ErrNotFound", err)
	}
}

func testThreadsNoAliasing(t *testing.T, setup setupFunc) {
	s := setup(t)
	msgs := json.RawMessage(`["abc"]`)
	th := mustCreateThread(t, s, &checkpoint.Thread{ID: id("thread"), Messages: msgs})
	msgs[2] = 'X' // the caller's buffer, after the call
	got, _ := s.LoadThread(ctx(t), th.ID)
	got.Messages[2] = 'Y' // a loaded copy
	again, _ := s.LoadThread(ctx(t), th.ID)
	checkJSON(t, "Messages", again.Messages, json.RawMessage(`["abc"]`))
}

func testThreadsIsolated(t *testing.T, setup setupFunc) {
	s := setup(t)
	a := mustCreateThread(t, s, &checkpoint.Thread{ID: id("a"), Messages: json.RawMessage(`["a"]`)})
	b := mustCreateThread(t, s, &checkpoint.Thread{ID: id("b"), Messages: json.RawMessage(`["b"]`)})
	a.Messages = json.RawMessage(`["a2"]`)
	if err := s.SaveThread(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	got, _ := s.LoadThread(ctx(t), b.ID)
	if got.Version != 1 {
		t.Errorf("saving a changed b's version to %d", got.Version)
	}
	checkJSON(t, "b.Messages", got.Messages, json.RawMessage(`["b"]`))
}
