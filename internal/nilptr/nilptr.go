// Package nilptr tells a nil interface value, and an interface holding a
// nil pointer or a nil func, from a usable one: the check the constructors make of the
// values they are given (a (*redis.Client)(nil) or a
// (*semaphore.Weighted)(nil) is a non-nil interface whose first method
// call panics), so that they refuse it with their own error.
package nilptr

import "reflect"

// Is reports whether v is nil, or holds a nil pointer or a nil func.
func Is(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Pointer, reflect.Func:
		// A nil func (exporters.SourceFunc(nil)) panics when its method
		// calls it, as a nil pointer's does. A nil slice or map may be a
		// usable empty value, and is not refused.
		return r.IsNil()
	}
	return false
}
