package interrupt

import (
	"errors"
	"fmt"
)

// Errors a predicate returns. They mirror the exceptions of the Python
// original (LookupError, TypeError, ValueError) so that callers can tell the
// cases apart with [errors.Is]; whatever the error, [ShouldInterrupt] counts
// it as a match.
var (
	// ErrMissingField: the arguments have no such field (Python LookupError).
	ErrMissingField = errors.New("missing argument")

	// ErrWrongType: the arguments are not an object, or the field's value
	// has a type the predicate cannot use (Python TypeError).
	ErrWrongType = errors.New("wrong type")

	// ErrInvalidValue: the value has the right type but cannot be compared
	// (Python ValueError), for example NaN or an integer literal longer
	// than [MaxIntDigits] digits.
	ErrInvalidValue = errors.New("invalid value")

	// ErrNaN: a NaN argument. It wraps [ErrInvalidValue].
	ErrNaN = fmt.Errorf("%w: NaN", ErrInvalidValue)

	// ErrInvalidRule: a rule or predicate was built wrong (a bad regular
	// expression, no pattern, a value that cannot be compared, an empty tool
	// name). Such a predicate fails every time it is called, so the call
	// needs approval, and [Validate] (and so [New]) reports the mistake
	// up front.
	ErrInvalidRule = errors.New("invalid rule")

	// ErrPredicatePanic: a predicate panicked. The panic is recovered and
	// counts as an error, so the call needs approval.
	ErrPredicatePanic = errors.New("predicate panicked")
)

// MaxIntDigits is the longest integer literal (in decimal digits, sign not
// counted) that the predicates convert to a number, the same limit as
// Python's int conversion. A longer literal is [ErrInvalidValue]; the limit
// keeps the cost of a comparison linear in the size of the arguments.
const MaxIntDigits = 4300
