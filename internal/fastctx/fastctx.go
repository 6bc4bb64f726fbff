// Package fastctx answers, without a method call, whether a context can
// ever end.
package fastctx

import (
	"context"
	"unsafe"
)

// The dynamic types of context.Background() and context.TODO(), whose Done
// is nil. A context of either type can never end, so fast paths skip the
// call to Done (about a fifth of an uncontended semaphore Acquire) by
// comparing the interface's type word, the first word of every interface
// value in the gc toolchain's layout.
var (
	backgroundType = typeWord(context.Background())
	todoType       = typeWord(context.TODO())
)

func typeWord(ctx context.Context) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&ctx))[0]
}

// NeverDone reports whether ctx is context.Background() or context.TODO().
// A false answer says nothing: the caller must then look at ctx.Done().
func NeverDone(ctx context.Context) bool {
	w := typeWord(ctx)
	return w == backgroundType || w == todoType
}
