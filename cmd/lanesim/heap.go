package main

// minHeap is a binary min-heap of T by before, which must be a total
// order, so that the items come out in the same order whatever the heap's
// layout and a seed gives the same run. It is typed (no container/heap) so
// that a push boxes nothing: the simulated runs are the slowest of
// lanesim's tests. The zero value needs its before set.
type minHeap[T any] struct {
	s      []T
	before func(a, b *T) bool
}

func (h *minHeap[T]) len() int { return len(h.s) }

func (h *minHeap[T]) push(v T) {
	h.s = append(h.s, v)
	s := h.s
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.before(&s[i], &s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// pop removes and returns the first item; h must not be empty.
func (h *minHeap[T]) pop() T {
	s := h.s
	first, n := s[0], len(s)-1
	s[0] = s[n]
	var zero T
	s[n] = zero // the slot keeps nothing alive
	s = s[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && h.before(&s[l], &s[least]) {
			least = l
		}
		if r < n && h.before(&s[r], &s[least]) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	h.s = s
	return first
}
