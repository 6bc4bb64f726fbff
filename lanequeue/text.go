package lanequeue

import "fmt"

// The enums of this package marshal as their names, so that a Kind in a
// JSON or YAML dashboard feed, a log line or a configuration file reads
// "keyed", not 0: encoding/json, slog and flag use these methods.

// MarshalText returns String's name, or an error for an unknown Kind.
func (k Kind) MarshalText() ([]byte, error) {
	switch k {
	case Keyed, Global, Rate:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("lanequeue: no lane kind %d", int(k))
}

// UnmarshalText sets k from String's name; other text is an error.
func (k *Kind) UnmarshalText(text []byte) error {
	for _, c := range []Kind{Keyed, Global, Rate} {
		if string(text) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("lanequeue: unknown lane kind %q (want keyed, global or rate)", text)
}

// MarshalText returns String's name, or an error for an unknown EventKind.
func (k EventKind) MarshalText() ([]byte, error) {
	switch k {
	case SlowWait, LongHold, Rejected:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("lanequeue: no event kind %d", int(k))
}

// UnmarshalText sets k from String's name; other text is an error.
func (k *EventKind) UnmarshalText(text []byte) error {
	for _, c := range []EventKind{SlowWait, LongHold, Rejected} {
		if string(text) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("lanequeue: unknown event kind %q (want slow-wait, long-hold or rejected)", text)
}
