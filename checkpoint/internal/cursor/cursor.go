// Package cursor encodes the list cursors of the stores: the position of
// the last item of a page in the list's order, so that the next page is a
// range scan that starts right after it (keyset paging: no offset, no
// state kept between calls, no duplicate or skip when rows come and go).
//
// A cursor is URL-safe base64 (no padding) of a short text that says what
// list and order it belongs to, and a CRC-32 of the text: a cursor that was
// cut, altered, padded or made for another list or order is refused with
// [checkpoint.ErrBadCursor] instead of being read as another position (the
// checksum detects mistakes; it is no protection against forgery, and
// needs none: a forged cursor is only a position in a list the caller may
// read anyway). The text is not an interface: callers see an opaque string.
package cursor

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Question is a position in a list of questions.
type Question struct {
	Order checkpoint.QuestionOrder
	// Seq is the store's creation sequence number of the question (1 for
	// the first question a store creates).
	Seq int64
	// Deadline is the question's deadline (DeadlineFirst only); zero when
	// it has none.
	Deadline time.Time
}

// Encode returns the cursor.
func (c Question) Encode() string {
	s := "q1." + strconv.Itoa(int(c.Order)) + "." + strconv.FormatInt(c.Seq, 10)
	if c.Order == checkpoint.DeadlineFirst {
		if c.Deadline.IsZero() {
			s += ".-"
		} else {
			s += "." + strconv.FormatInt(c.Deadline.Unix(), 10) + "." + strconv.Itoa(c.Deadline.Nanosecond())
		}
	}
	return seal(s)
}

// DecodeQuestion returns the position s holds, if s is a question cursor
// of the given order.
func DecodeQuestion(s string, order checkpoint.QuestionOrder) (Question, error) {
	f, err := fields(s, "q1", 0)
	if err != nil {
		return Question{}, err
	}
	bad := fmt.Errorf("%w: %q is not a cursor of ListQuestions", checkpoint.ErrBadCursor, clip(s))
	if len(f) < 2 {
		return Question{}, bad
	}
	o, err1 := strconv.Atoi(f[0])
	seq, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || seq < 1 {
		return Question{}, bad
	}
	c := Question{Order: checkpoint.QuestionOrder(o), Seq: seq}
	if c.Order != order {
		return Question{}, fmt.Errorf("%w: the cursor is for questions %s, not %s", checkpoint.ErrBadCursor, c.Order, order)
	}
	switch {
	case order == checkpoint.DeadlineFirst && len(f) == 3 && f[2] == "-":
	case order == checkpoint.DeadlineFirst && len(f) == 4:
		if c.Deadline, err = unix(f[2], f[3]); err != nil {
			return Question{}, bad
		}
	case order != checkpoint.DeadlineFirst && len(f) == 2:
	default:
		return Question{}, bad
	}
	// Only the text Encode makes: no sign, zero or padding of another
	// spelling passes for a position.
	if c.Encode() != s {
		return Question{}, bad
	}
	return c, nil
}

// Thread is a position in a list of threads, newest first.
type Thread struct {
	CreatedAt time.Time
	ID        string
}

// Encode returns the cursor.
func (c Thread) Encode() string {
	return seal("t1." + strconv.FormatInt(c.CreatedAt.Unix(), 10) + "." + strconv.Itoa(c.CreatedAt.Nanosecond()) + "." + c.ID)
}

// DecodeThread returns the position s holds, if s is a thread cursor.
func DecodeThread(s string) (Thread, error) {
	// The ID is last and may hold dots: split off the two numbers only.
	f, err := fields(s, "t1", 3)
	if err != nil {
		return Thread{}, err
	}
	bad := fmt.Errorf("%w: %q is not a cursor of ListThreads", checkpoint.ErrBadCursor, clip(s))
	if len(f) != 3 {
		return Thread{}, bad
	}
	created, err := unix(f[0], f[1])
	if err != nil {
		return Thread{}, bad
	}
	c := Thread{CreatedAt: created, ID: f[2]}
	if c.Encode() != s {
		return Thread{}, bad
	}
	return c, nil
}

// fields decodes s and splits it on dots (into at most n fields when n >
// 0) after the prefix, which names the list and the format's version.
func fields(s, prefix string, n int) ([]string, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 4 || binary.BigEndian.Uint32(b[len(b)-4:]) != crc32.ChecksumIEEE(b[:len(b)-4]) {
		return nil, fmt.Errorf("%w: %q is not a cursor", checkpoint.ErrBadCursor, clip(s))
	}
	kind, rest, _ := strings.Cut(string(b[:len(b)-4]), ".")
	if kind != prefix {
		what := map[string]string{"q1": "ListQuestions", "t1": "ListThreads"}
		if other, ok := what[kind]; ok {
			return nil, fmt.Errorf("%w: the cursor is one of %s, not of %s", checkpoint.ErrBadCursor, other, what[prefix])
		}
		return nil, fmt.Errorf("%w: %q is not a cursor of %s", checkpoint.ErrBadCursor, clip(s), what[prefix])
	}
	if n > 0 {
		return strings.SplitN(rest, ".", n), nil
	}
	return strings.Split(rest, "."), nil
}

// seal appends the checksum to text and encodes both.
func seal(text string) string {
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint32([]byte(text), crc32.ChecksumIEEE([]byte(text))))
}

// clip shortens a refused cursor for an error message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

func unix(sec, nsec string) (time.Time, error) {
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.Atoi(nsec)
	if err1 != nil || err2 != nil || ns < 0 || ns >= 1e9 {
		return time.Time{}, fmt.Errorf("bad time")
	}
	return time.Unix(s, int64(ns)).UTC(), nil
}

// CompareThreads orders two positions of ListThreads, newest first:
// negative when a comes first.
func CompareThreads(a, b Thread) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// Compare orders two positions of the same order: negative when a comes
// first. It is the definition of the question orders.
func Compare(a, b Question) int {
	switch a.Order {
	case checkpoint.NewestFirst:
		return cmp.Compare(b.Seq, a.Seq)
	case checkpoint.DeadlineFirst:
		if a.Deadline.IsZero() != b.Deadline.IsZero() {
			if a.Deadline.IsZero() {
				return 1
			}
			return -1
		}
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// StartQuestions returns where a page of ListQuestions starts: the page
// to fill (its size is f.Limit, 100 when zero or less), and the position
// it starts after (nil: at the beginning).
func StartQuestions(f checkpoint.QuestionFilter) (*QuestionPage, *Question, error) {
	switch f.Order {
	case checkpoint.OldestFirst, checkpoint.NewestFirst, checkpoint.DeadlineFirst:
	default:
		return nil, nil, fmt.Errorf("checkpoint: list questions: unknown %s", f.Order)
	}
	var after *Question
	if f.After != "" {
		c, err := DecodeQuestion(f.After, f.Order)
		if err != nil {
			return nil, nil, err
		}
		after = &c
	}
	return &QuestionPage{page: page[*checkpoint.Question, Question]{Limit: pageSize(f.Limit)}, order: f.Order}, after, nil
}

// StartThreads returns where a page of ListThreads starts, as
// [StartQuestions] does for questions.
func StartThreads(f checkpoint.ThreadFilter) (*ThreadPage, *Thread, error) {
	var after *Thread
	if f.After != "" {
		c, err := DecodeThread(f.After)
		if err != nil {
			return nil, nil, err
		}
		after = &c
	}
	return &ThreadPage{page[*checkpoint.Thread, Thread]{Limit: pageSize(f.Limit)}}, after, nil
}

// page gathers a page of a list as a store reads it in order, reading one
// item more than the page to tell whether a next page exists.
type page[T any, P interface{ Encode() string }] struct {
	Limit int
	Items []T
	last  P
	more  bool
}

func (p *page[T, P]) add(item T, pos P) (complete bool) {
	if len(p.Items) == p.Limit {
		p.more = true
		return true
	}
	p.Items = append(p.Items, item)
	p.last = pos
	return false
}

// Next returns the cursor of the next page: "" when the list ended.
// Cut ends the page before an item that cannot be listed yet (a store
// that must not list past it): Next continues after the last item added.
// It reports false when no item was added, so there is nothing to
// continue from.
func (p *page[T, P]) Cut() bool {
	if len(p.Items) == 0 {
		return false
	}
	p.more = true
	return true
}

func (p *page[T, P]) Next() string {
	if !p.more {
		return ""
	}
	return p.last.Encode()
}

// QuestionPage is a page of ListQuestions.
type QuestionPage struct {
	page[*checkpoint.Question, Question]
	order checkpoint.QuestionOrder
}

// Add adds the next question of the list (seq is its sequence number)
// and reports whether the page is complete: it held Limit questions, and
// q, one more, was not added.
func (p *QuestionPage) Add(q *checkpoint.Question, seq int64) (complete bool) {
	return p.add(q, Question{Order: p.order, Seq: seq, Deadline: q.Deadline})
}

// ThreadPage is a page of ListThreads.
type ThreadPage struct {
	page[*checkpoint.Thread, Thread]
}

// Add adds the next thread of the list and reports whether the page is
// complete, as [QuestionPage.Add] does.
func (p *ThreadPage) Add(t *checkpoint.Thread) (complete bool) {
	return p.add(t, Thread{CreatedAt: t.CreatedAt, ID: t.ID})
}

func pageSize(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}
