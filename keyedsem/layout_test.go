package keyedsem_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/sessionlane/lanes/keyedsem"
)

// The layout that keeps an idle key smaller than an x/sync semaphore: an
// entry is six words with a string key (a 48-byte size class), with no
// token inside; a token, with its grant's start for hold times, fills a
// cache line.
func TestLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout pinned on 64-bit platforms")
	}
	assert.Equal(t, uintptr(48), keyedsem.EntrySizeString, "entry[string] size")
	assert.Equal(t, uintptr(64), keyedsem.TokenSize, "token size")
}
