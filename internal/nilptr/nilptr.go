// Package nilptr tells a nil interface value, and an interface holding a
// nil pointer, from a usable one: the check the constructors make of the
// values they are given (a (*redis.Client)(nil) or a
// (*semaphore.Weighted)(nil) is a non-nil interface whose first method
// call panics), so that they refuse it with their own error.
package nilptr

import "reflect"

// Is reports whether v is nil, or holds a nil pointer.
func Is(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
