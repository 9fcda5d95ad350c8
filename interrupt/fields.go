package interrupt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// object is the arguments of a tool call seen as named fields.
type object interface {
	// get returns the field's Go value, and false when there is no such
	// field.
	get(name string) (any, bool)
}

type mapObject map[string]any

func (m mapObject) get(name string) (any, bool) {
	v, ok := m[name]
	return v, ok
}

type reflectMap struct{ m reflect.Value }

func (o reflectMap) get(name string) (any, bool) {
	k := reflect.ValueOf(name).Convert(o.m.Type().Key())
	v := o.m.MapIndex(k)
	if !v.IsValid() {
		return nil, false
	}
	return v.Interface(), true
}

type structObject struct {
	v      reflect.Value
	fields map[string][]int
}

func (o structObject) get(name string) (any, bool) {
	index, ok := o.fields[name]
	if !ok {
		return nil, false
	}
	fv, ok := fieldByIndex(o.v, index)
	if !ok {
		return nil, false
	}
	return fv.Interface(), true
}

// asObject gives access to the fields of a tool call's arguments: a JSON
// object (json.RawMessage, []byte or string holding JSON text), a map with
// string keys, or a struct whose fields are named by their JSON names.
// Pointers and interfaces are followed; a value with a MarshalJSON method is
// seen through its JSON. Anything else is ErrWrongType.
func asObject(args any) (object, error) {
	switch x := args.(type) {
	case map[string]any:
		if x == nil {
			return nil, fmt.Errorf("%w: arguments are null, not an object", ErrWrongType)
		}
		return mapObject(x), nil
	case json.RawMessage:
		return jsonObject(x)
	case []byte:
		return jsonObject(x)
	case string:
		return jsonObject([]byte(x))
	}
	rv := reflect.ValueOf(args)
	for depth := 0; ; depth++ {
		if !rv.IsValid() {
			return nil, fmt.Errorf("%w: arguments are null, not an object", ErrWrongType)
		}
		if depth > maxDepth {
			return nil, fmt.Errorf("%w: arguments nested deeper than %d pointers", ErrWrongType, maxDepth)
		}
		t := rv.Type()
		if (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface || t.Kind() == reflect.Map) && rv.IsNil() {
			return nil, fmt.Errorf("%w: arguments are null, not an object", ErrWrongType)
		}
		if t.Implements(jsonMarshalerType) {
			data, err := rv.Interface().(json.Marshaler).MarshalJSON()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrWrongType, err)
			}
			return jsonObject(data)
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Interface:
			rv = rv.Elem()
			continue
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				return nil, fmt.Errorf("%w: arguments are a map with %s keys", ErrWrongType, t.Key())
			}
			return reflectMap{rv}, nil
		case reflect.Struct:
			return structObject{v: rv, fields: structFields(t)}, nil
		}
		return nil, fmt.Errorf("%w: arguments are a %s, not an object", ErrWrongType, t)
	}
}

func jsonObject(data []byte) (object, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: arguments are a JSON %s, not an object", ErrWrongType, jsonKind(v))
	}
	return mapObject(m), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// fieldByIndex is reflect.Value.FieldByIndex that reports false instead of
// panicking when it meets a nil embedded pointer (encoding/json then leaves
// the promoted fields out).
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

var fieldCache sync.Map // reflect.Type -> map[string][]int

// structFields returns the JSON names of a struct type's fields and the index
// path of each, following encoding/json: a `json:"name"` tag renames a
// field, `json:"-"` drops it, options after the comma (omitempty, string)
// do not change the name, unexported fields are left out, and the fields of
// embedded structs are promoted, the shallowest (then the tagged) field
// winning a name and an unresolved tie dropping it.
func structFields(t reflect.Type) map[string][]int {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string][]int)
	}
	f, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return f.(map[string][]int)
}

type jsonField struct {
	name   string
	tagged bool
	index  []int
	typ    reflect.Type
}

// typeFields is a condensed copy of the algorithm in encoding/json.
func typeFields(t reflect.Type) map[string][]int {
	var current []jsonField
	next := []jsonField{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []jsonField

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := range f.typ.NumField() {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(f.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					field := jsonField{name: name, tagged: tagged, index: index, typ: ft}
					fields = append(fields, field)
					if count[f.typ] > 1 {
						// Two copies at the same level annihilate each other
						// below; one is enough to do that.
						fields = append(fields, field)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, jsonField{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b jsonField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})

	out := map[string][]int{}
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		if f, ok := dominantField(fields[i:j]); ok {
			out[f.name] = f.index
		}
		i = j
	}
	return out
}

// dominantField picks the field that wins a name among fields sorted by
// depth then tag: the only shallowest one, or the only tagged shallowest one.
func dominantField(fields []jsonField) (jsonField, bool) {
	if len(fields) > 1 && len(fields[0].index) == len(fields[1].index) && fields[0].tagged == fields[1].tagged {
		return jsonField{}, false
	}
	return fields[0], true
}

func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
