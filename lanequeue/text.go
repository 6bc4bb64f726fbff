package lanequeue

import "fmt"

// A Kind marshals as its name, so that LaneStats in a JSON dashboard feed
// or a slog line reads "keyed", not 0: encoding/json and slog's handlers
// use MarshalText.

// MarshalText returns String's name, or an error for an unknown Kind.
func (k Kind) MarshalText() ([]byte, error) {
	switch k {
	case Keyed, Global, Rate:
		return []byte(k.String()), nil
	}
	return nil, fmt.Errorf("lanequeue: no lane kind %d", int(k))
}
