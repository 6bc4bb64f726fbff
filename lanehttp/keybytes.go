package lanehttp

import (
	"reflect"
	"strings"
)

// keyMeasure returns the function that counts a key's bytes for
// [Config.MaxKeyBytes]: the lengths of the strings in it, the only part of
// a comparable K whose size the request chooses. It looks at K once: a
// string key is measured by len, a K with no string anywhere in it
// (numbers, pointers, a struct of them) costs nothing, and the rest
// (structs, arrays, interfaces) are walked by reflection.
func keyMeasure[K comparable]() func(K) int {
	typ := reflect.TypeFor[K]()
	switch {
	case typ.Kind() == reflect.String:
		return func(k K) int { return reflect.ValueOf(&k).Elem().Len() }
	case !mayHoldStrings(typ):
		return func(K) int { return 0 }
	}
	return func(k K) int { return stringBytes(reflect.ValueOf(&k).Elem()) }
}

// mayHoldStrings says whether a value of typ can hold a string: a string,
// an interface (its dynamic value may be one), or a struct or array with
// one inside. Pointers and channels are not followed: what they point at
// is the caller's, and a keyed lane keeps only the pointer.
func mayHoldStrings(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Struct:
		for i := range typ.NumField() {
			if mayHoldStrings(typ.Field(i).Type) {
				return true
			}
		}
	case reflect.Array:
		return typ.Len() > 0 && mayHoldStrings(typ.Elem())
	}
	return false
}

// stringBytes is the total length of the strings in v.
func stringBytes(v reflect.Value) int {
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return stringBytes(v.Elem())
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += stringBytes(v.Field(i))
		}
		return n
	case reflect.Array:
		if !mayHoldStrings(v.Type().Elem()) {
			return 0
		}
		n := 0
		for i := range v.Len() {
			n += stringBytes(v.Index(i))
		}
		return n
	}
	return 0
}

// keyOwner returns the function that gives the middleware a key of its
// own: a string key (any K whose kind is string) is copied, so that a key
// cut from a longer string (a part of a header, of a path) does not keep
// that string alive for as long as the keyed lane keeps the key; the
// bound [Config.MaxKeyBytes] puts on the idle keys' bytes then holds. A
// copy is at most MaxKeyBytes long, as it is made after the length check.
// Other keys are kept as Key returned them: the strings inside a struct
// or an array key are the caller's to own (Config.Key says so).
func keyOwner[K comparable]() func(K) K {
	if reflect.TypeFor[K]().Kind() != reflect.String {
		return func(k K) K { return k }
	}
	return func(k K) K {
		v := reflect.ValueOf(&k).Elem()
		v.SetString(strings.Clone(v.String()))
		return k
	}
}
