package keyedsem

// AgedKey is agedKey, the place in line of a waiter with priorities.
var AgedKey = agedKey
