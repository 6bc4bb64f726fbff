package lanequeue

import "fmt"

// The enums of this package marshal as their names, so that a Kind in a
// JSON or YAML dashboard feed, a log line or a configuration file reads
// "keyed", not 0: encoding/json, slog and flag use these methods.

// MarshalText returns the name String gives, and an error for a value
// that is not one of the kinds.
func (k Kind) MarshalText() ([]byte, error) {
	switch k {
	case Keyed, Global, Rate:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("lanequeue: no lane kind %d", int(k))
}

// UnmarshalText sets k from a name MarshalText returns ("keyed",
// "global" or "rate"); any other text is an error and leaves k as it was.
func (k *Kind) UnmarshalText(text []byte) error {
	for _, c := range []Kind{Keyed, Global, Rate} {
		if string(text) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("lanequeue: unknown lane kind %q (want keyed, global or rate)", text)
}

// MarshalText returns the name String gives, and an error for a value
// that is not one of the event kinds.
func (k EventKind) MarshalText() ([]byte, error) {
	switch k {
	case SlowWait, LongHold, Rejected:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("lanequeue: no event kind %d", int(k))
}

// UnmarshalText sets k from a name MarshalText returns ("slow-wait",
// "long-hold" or "rejected"); any other text is an error and leaves k as
// it was.
func (k *EventKind) UnmarshalText(text []byte) error {
	for _, c := range []EventKind{SlowWait, LongHold, Rejected} {
		if string(text) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("lanequeue: unknown event kind %q (want slow-wait, long-hold or rejected)", text)
}
