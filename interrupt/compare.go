package interrupt

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

type op uint8

const (
	opGt op = iota
	opGe
	opLt
	opLe
	opEq
)

func (o op) name() string { return [...]string{"Gt", "Ge", "Lt", "Le", "Eq"}[o] }

// holds reports whether a comparison result c (-1, 0, +1) satisfies o.
func (o op) holds(c int) bool {
	switch o {
	case opGt:
		return c > 0
	case opGe:
		return c >= 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	}
	return c == 0
}

// ordered reports whether values of kind k have an order (Python: numbers,
// strings, booleans and lists do; None and dicts only support ==).
func ordered(k kind) bool {
	return k != kindNull && k != kindObject
}

// compare orders arg against want, or reports ErrWrongType when they do not
// compare: a number compares with numbers only (never booleans), any other
// value with a value of its own kind. Lists compare element by element like
// Python's, under the same rule for each element.
func compare(arg, want value) (int, error) {
	if arg.kind != want.kind {
		return 0, fmt.Errorf("%w: a %s does not compare with a %s", ErrWrongType, arg.kind, want.kind)
	}
	switch want.kind {
	case kindNumber:
		return arg.n.cmp(want.n), nil
	case kindString:
		// Byte order of UTF-8 is code point order, Python's str order.
		return strings.Compare(arg.s, want.s), nil
	case kindBool:
		return boolInt(arg.b) - boolInt(want.b), nil
	case kindList:
		for i := range min(len(arg.list), len(want.list)) {
			eq, err := equal(arg.list[i], want.list[i])
			if err != nil {
				return 0, fieldErr(strconv.Itoa(i), err)
			}
			if !eq {
				c, err := compare(arg.list[i], want.list[i])
				if err != nil {
					return 0, fieldErr(strconv.Itoa(i), err)
				}
				return c, nil
			}
		}
		return len(arg.list) - len(want.list), nil
	}
	return 0, fmt.Errorf("%w: a %s has no order", ErrWrongType, want.kind)
}

// equal is == under the rules of compare, extended to null and objects.
func equal(arg, want value) (bool, error) {
	if arg.kind != want.kind {
		return false, fmt.Errorf("%w: a %s does not compare with a %s", ErrWrongType, arg.kind, want.kind)
	}
	switch want.kind {
	case kindNull:
		return true, nil
	case kindList:
		if len(arg.list) != len(want.list) {
			return false, nil
		}
		for i := range want.list {
			eq, err := equal(arg.list[i], want.list[i])
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case kindObject:
		if len(arg.obj) != len(want.obj) {
			return false, nil
		}
		// Sorted keys make the outcome (false or an error) deterministic.
		for _, k := range slices.Sorted(maps.Keys(want.obj)) {
			w := want.obj[k]
			a, ok := arg.obj[k]
			if !ok {
				return false, nil
			}
			eq, err := equal(a, w)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	c, err := compare(arg, want)
	return c == 0, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
