package cursor

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []Question{
		{Order: checkpoint.OldestFirst, Seq: 1},
		{Order: checkpoint.NewestFirst, Seq: 1 << 62},
		{Order: checkpoint.DeadlineFirst, Seq: 3},
		{Order: checkpoint.DeadlineFirst, Seq: 3, Deadline: time.Date(1969, 7, 20, 20, 17, 40, 999, time.UTC)},
		{Order: checkpoint.DeadlineFirst, Seq: 3, Deadline: time.Date(294246, 1, 1, 0, 0, 0, 1000, time.UTC)},
	} {
		got, err := DecodeQuestion(c.Encode(), c.Order)
		if err != nil || got.Seq != c.Seq || got.Order != c.Order || !got.Deadline.Equal(c.Deadline) {
			t.Errorf("DecodeQuestion(Encode(%+v)) = %+v, %v", c, got, err)
		}
	}
	for _, c := range []Thread{
		{CreatedAt: time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: "thread-1"},
		{CreatedAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), ID: "a.b.c with dots, spaces and ☃\x00"},
		{CreatedAt: time.Unix(-1, 5), ID: ""},
	} {
		got, err := DecodeThread(c.Encode())
		if err != nil || got.ID != c.ID || !got.CreatedAt.Equal(c.CreatedAt) {
			t.Errorf("DecodeThread(Encode(%+v)) = %+v, %v", c, got, err)
		}
	}
}

// Whatever the input, decoding returns a position that encodes back to
// it, or ErrBadCursor; it never panics.
func FuzzDecode(f *testing.F) {
	f.Add(Question{Order: checkpoint.DeadlineFirst, Seq: 3, Deadline: time.Unix(5, 6)}.Encode())
	f.Add(Question{Order: checkpoint.NewestFirst, Seq: 9}.Encode())
	f.Add(Thread{CreatedAt: time.Unix(5, 6), ID: "t.1"}.Encode())
	f.Add("not a cursor")
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range []checkpoint.QuestionOrder{checkpoint.OldestFirst, checkpoint.NewestFirst, checkpoint.DeadlineFirst} {
			c, err := DecodeQuestion(s, o)
			if err != nil && !errors.Is(err, checkpoint.ErrBadCursor) {
				t.Fatalf("DecodeQuestion(%q): %v, not ErrBadCursor", s, err)
			}
			if err == nil && (c.Encode() != s || c.Order != o || c.Seq < 1) {
				t.Fatalf("DecodeQuestion(%q) = %+v", s, c)
			}
		}
		c, err := DecodeThread(s)
		if err != nil && !errors.Is(err, checkpoint.ErrBadCursor) {
			t.Fatalf("DecodeThread(%q): %v, not ErrBadCursor", s, err)
		}
		if err == nil && c.Encode() != s {
			t.Fatalf("DecodeThread(%q) = %+v", s, c)
		}
	})
}
