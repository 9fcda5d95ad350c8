package checkpoint

import (
	"context"
	"iter"
)

// QuestionLister is the part of a [Store] that lists questions a page at a
// time.
type QuestionLister interface {
	ListQuestions(ctx context.Context, f QuestionFilter) ([]*Question, string, error)
}

// ThreadLister is the part of a [Store] that lists threads a page at a
// time.
type ThreadLister interface {
	ListThreads(ctx context.Context, f ThreadFilter) ([]*Thread, string, error)
}

// Questions yields every question f selects, from f.After on, reading
// pages of f.Limit: the cursor loop each caller would otherwise write.
// An error ends the sequence, yielded with a nil question; stopping the
// loop early reads no further page; an empty page ends it (a cursor that
// leads nowhere cannot spin).
//
//	for q, err := range checkpoint.Questions(ctx, store, checkpoint.QuestionFilter{Status: checkpoint.QuestionPending}) {
//		if err != nil {
//			return err
//		}
//		...
//	}
func Questions(ctx context.Context, store QuestionLister, f QuestionFilter) iter.Seq2[*Question, error] {
	return pages(func(after string) ([]*Question, string, error) {
		page := f // f stays as given: the sequence may be ranged again
		if after != "" {
			page.After = after
		}
		return store.ListQuestions(ctx, page)
	})
}

// Threads yields every thread f selects, as [Questions] does questions.
func Threads(ctx context.Context, store ThreadLister, f ThreadFilter) iter.Seq2[*Thread, error] {
	return pages(func(after string) ([]*Thread, string, error) {
		page := f
		if after != "" {
			page.After = after
		}
		return store.ListThreads(ctx, page)
	})
}

// pages yields the items of the pages list returns, each page read with
// the cursor the one before returned ("" for the first).
func pages[T any](list func(after string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for after := ""; ; {
			items, next, err := list(after)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" || len(items) == 0 {
				return
			}
			after = next
		}
	}
}
