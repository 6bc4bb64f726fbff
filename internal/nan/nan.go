// Package nan tells whether a comparable key type can hold a value that is
// not equal to itself (a NaN), which a map could never find again: the
// keyed semaphore and the lane queue decide it once per type, so that the
// check on each call costs nothing for the key types that cannot.
package nan

import "reflect"

// Possible reports whether a value of type K can be unequal to itself:
// whether K is, or holds, a float, a complex or an interface.
func Possible[K comparable]() bool { return possible(reflect.TypeFor[K]()) }

func possible(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.Interface:
		return true
	case reflect.Array:
		return t.Len() > 0 && possible(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if possible(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
