package interrupt

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// This file turns the arguments a predicate receives (a JSON object, a map or
// a typed argument struct) into plain values that compare the way Python
// compares the values json.loads returns: null, bool, number, string, list,
// object. Numbers are exact: integers of any size, floats by their exact
// binary value, so 2^53+1 > 2^53 and 1 == 1.0.

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindList
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "bool"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindList:
		return "list"
	default:
		return "object"
	}
}

// value is a normalized argument or comparison value.
type value struct {
	kind kind
	b    bool
	n    number
	s    string
	list []value
	obj  map[string]value
}

// number is a finite exact rational, or an infinity (inf is -1 or +1).
// NaN is never a number: it is rejected with ErrNaN when values are
// normalized.
type number struct {
	inf int
	r   *big.Rat
}

func (a number) cmp(b number) int {
	if a.inf != 0 || b.inf != 0 {
		switch {
		case a.inf < b.inf:
			return -1
		case a.inf > b.inf:
			return 1
		}
		return 0
	}
	return a.r.Cmp(b.r)
}

func (a number) String() string {
	switch {
	case a.inf < 0:
		return "-Inf"
	case a.inf > 0:
		return "+Inf"
	case a.r.IsInt():
		return a.r.Num().String()
	}
	return a.r.RatString()
}

func floatNumber(f float64) (number, error) {
	switch {
	case math.IsNaN(f):
		return number{}, ErrNaN
	case math.IsInf(f, 1):
		return number{inf: 1}, nil
	case math.IsInf(f, -1):
		return number{inf: -1}, nil
	}
	return number{r: new(big.Rat).SetFloat64(f)}, nil
}

// parseNumber reads a number literal the way Python's json module does: an
// integer literal is an exact integer, anything with a fraction or an
// exponent is a float64 (so "1e400" is +Inf, like float("1e400")).
func parseNumber(s string) (number, error) {
	if !isJSONNumber(s) {
		return number{}, fmt.Errorf("%w: %q is not a JSON number", ErrWrongType, s)
	}
	if strings.ContainsAny(s, ".eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return number{}, fmt.Errorf("%w: %v", ErrInvalidValue, err)
		}
		return floatNumber(f)
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number{r: new(big.Rat).SetInt64(i)}, nil
	}
	if len(strings.TrimPrefix(s, "-")) > MaxIntDigits {
		return number{}, fmt.Errorf("%w: integer literal longer than %d digits", ErrInvalidValue, MaxIntDigits)
	}
	i, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return number{}, fmt.Errorf("%w: %q is not a JSON number", ErrWrongType, s)
	}
	return number{r: new(big.Rat).SetInt(i)}, nil
}

// isJSONNumber reports whether s is a number literal in JSON syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// decodeJSON decodes one JSON value, keeping numbers as json.Number so that
// integers stay exact. Trailing data is an error.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: arguments are not valid JSON: %v", ErrWrongType, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: arguments are not valid JSON: trailing data", ErrWrongType)
	}
	return v, nil
}

// maxDepth bounds the nesting of the values normalize follows, so that a
// cyclic structure is an error rather than an endless loop.
const maxDepth = 1000

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// normalize turns a Go value into a plain value, the way encoding/json would
// see it (struct fields by their JSON names, []byte as base64 text, values
// with a MarshalJSON method by what it produces), except that numbers stay
// exact and a typed field keeps its type even with a ",string" tag option.
func normalize(v any) (value, error) {
	return normalizeDepth(v, 0)
}

func normalizeDepth(v any, depth int) (value, error) {
	if depth > maxDepth {
		return value{}, fmt.Errorf("%w: value nested deeper than %d levels", ErrWrongType, maxDepth)
	}
	// Fast paths for what encoding/json produces and the common Go types.
	switch x := v.(type) {
	case nil:
		return value{kind: kindNull}, nil
	case bool:
		return value{kind: kindBool, b: x}, nil
	case string:
		return value{kind: kindString, s: x}, nil
	case json.Number:
		n, err := parseNumber(string(x))
		return value{kind: kindNumber, n: n}, err
	case json.RawMessage:
		d, err := decodeJSON(x)
		if err != nil {
			return value{}, err
		}
		return normalizeDepth(d, depth+1)
	case float64:
		n, err := floatNumber(x)
		return value{kind: kindNumber, n: n}, err
	case int:
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetInt64(int64(x))}}, nil
	case int64:
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetInt64(x)}}, nil
	case *big.Int:
		if x == nil {
			return value{kind: kindNull}, nil
		}
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetInt(x)}}, nil
	case big.Int:
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetInt(&x)}}, nil
	case *big.Rat:
		if x == nil {
			return value{kind: kindNull}, nil
		}
		return value{kind: kindNumber, n: number{r: new(big.Rat).Set(x)}}, nil
	case big.Rat:
		return value{kind: kindNumber, n: number{r: new(big.Rat).Set(&x)}}, nil
	case *big.Float:
		if x == nil {
			return value{kind: kindNull}, nil
		}
		return bigFloat(x), nil
	case big.Float:
		return bigFloat(&x), nil
	case []any:
		return normalizeList(len(x), func(i int) any { return x[i] }, depth)
	case map[string]any:
		if x == nil {
			return value{kind: kindNull}, nil
		}
		obj := make(map[string]value, len(x))
		for k, e := range x {
			ev, err := normalizeDepth(e, depth+1)
			if err != nil {
				return value{}, fieldErr(k, err)
			}
			obj[k] = ev
		}
		return value{kind: kindObject, obj: obj}, nil
	}
	return normalizeReflect(reflect.ValueOf(v), depth)
}

func bigFloat(x *big.Float) value {
	if x.IsInf() {
		inf := 1
		if x.Signbit() {
			inf = -1
		}
		return value{kind: kindNumber, n: number{inf: inf}}
	}
	r, _ := x.Rat(nil)
	return value{kind: kindNumber, n: number{r: r}}
}

func normalizeList(n int, at func(int) any, depth int) (value, error) {
	list := make([]value, n)
	for i := range n {
		ev, err := normalizeDepth(at(i), depth+1)
		if err != nil {
			return value{}, fieldErr(strconv.Itoa(i), err)
		}
		list[i] = ev
	}
	return value{kind: kindList, list: list}, nil
}

// fieldErr adds a step of the path to a nested value to an error. The path
// is kept as a list and written out once, so that an error from deep inside
// a value costs time linear in its depth.
func fieldErr(step string, err error) error {
	if pe, ok := err.(*pathError); ok {
		pe.steps = append(pe.steps, step)
		return pe
	}
	return &pathError{steps: []string{step}, err: err}
}

type pathError struct {
	steps []string // innermost first
	err   error
}

func (e *pathError) Error() string {
	var b strings.Builder
	for i := len(e.steps) - 1; i >= 0; i-- {
		b.WriteString("[")
		b.WriteString(e.steps[i])
		b.WriteString("]")
	}
	b.WriteString(": ")
	b.WriteString(e.err.Error())
	return b.String()
}

func (e *pathError) Unwrap() error { return e.err }

func normalizeReflect(rv reflect.Value, depth int) (value, error) {
	if !rv.IsValid() {
		return value{kind: kindNull}, nil
	}
	t := rv.Type()
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		if rv.IsNil() {
			return value{kind: kindNull}, nil
		}
	}
	// Exact numbers of the math/big types (and named pointers to them) were
	// handled above; other types with a JSON form use it.
	if t.Implements(jsonMarshalerType) {
		data, err := rv.Interface().(json.Marshaler).MarshalJSON()
		if err != nil {
			return value{}, fmt.Errorf("%w: %v", ErrWrongType, err)
		}
		d, err := decodeJSON(data)
		if err != nil {
			return value{}, err
		}
		return normalizeDepth(d, depth+1)
	}
	if t.Implements(textMarshalerType) {
		text, err := rv.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return value{}, fmt.Errorf("%w: %v", ErrWrongType, err)
		}
		return value{kind: kindString, s: string(text)}, nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		return normalizeDepth(rv.Elem().Interface(), depth+1)
	case reflect.Bool:
		return value{kind: kindBool, b: rv.Bool()}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetInt64(rv.Int())}}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return value{kind: kindNumber, n: number{r: new(big.Rat).SetUint64(rv.Uint())}}, nil
	case reflect.Float32, reflect.Float64:
		n, err := floatNumber(rv.Float())
		return value{kind: kindNumber, n: n}, err
	case reflect.String:
		if t == reflect.TypeFor[json.Number]() {
			n, err := parseNumber(rv.String())
			return value{kind: kindNumber, n: n}, err
		}
		return value{kind: kindString, s: rv.String()}, nil
	case reflect.Slice:
		if rv.IsNil() {
			return value{kind: kindNull}, nil
		}
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(jsonMarshalerType) &&
			!reflect.PointerTo(t.Elem()).Implements(textMarshalerType) {
			// encoding/json writes a byte slice as base64 text.
			return value{kind: kindString, s: base64.StdEncoding.EncodeToString(rv.Bytes())}, nil
		}
		return normalizeList(rv.Len(), func(i int) any { return rv.Index(i).Interface() }, depth)
	case reflect.Array:
		return normalizeList(rv.Len(), func(i int) any { return rv.Index(i).Interface() }, depth)
	case reflect.Map:
		if rv.IsNil() {
			return value{kind: kindNull}, nil
		}
		obj := make(map[string]value, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k, err := mapKey(iter.Key())
			if err != nil {
				return value{}, err
			}
			ev, err := normalizeDepth(iter.Value().Interface(), depth+1)
			if err != nil {
				return value{}, fieldErr(k, err)
			}
			obj[k] = ev
		}
		return value{kind: kindObject, obj: obj}, nil
	case reflect.Struct:
		fields := structFields(t)
		obj := make(map[string]value, len(fields))
		for name, index := range fields {
			fv, ok := fieldByIndex(rv, index)
			if !ok {
				continue
			}
			ev, err := normalizeDepth(fv.Interface(), depth+1)
			if err != nil {
				return value{}, fieldErr(name, err)
			}
			obj[name] = ev
		}
		return value{kind: kindObject, obj: obj}, nil
	}
	return value{}, fmt.Errorf("%w: cannot compare a %s", ErrWrongType, t)
}

// mapKey turns a map key into the string encoding/json would use.
func mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if k.Type().Implements(textMarshalerType) {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		text, err := k.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrWrongType, err)
		}
		return string(text), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("%w: map key of type %s", ErrWrongType, k.Type())
}
