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
	return func(yield func(*Question, error) bool) {
		for {
			qs, next, err := store.ListQuestions(ctx, f)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, q := range qs {
				if !yield(q, nil) {
					return
				}
			}
			if next == "" || len(qs) == 0 {
				return
			}
			f.After = next
		}
	}
}

// Threads yields every thread f selects, as [Questions] does questions.
func Threads(ctx context.Context, store ThreadLister, f ThreadFilter) iter.Seq2[*Thread, error] {
	return func(yield func(*Thread, error) bool) {
		for {
			ths, next, err := store.ListThreads(ctx, f)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, th := range ths {
				if !yield(th, nil) {
					return
				}
			}
			if next == "" || len(ths) == 0 {
				return
			}
			f.After = next
		}
	}
}
