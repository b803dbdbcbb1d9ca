package engine

import (
	"testing"
	"unsafe"
)

// A million held keys is a million locks (issue 7's target is under 400
// bytes of server memory per held key): the structs must not grow past
// their allocation size class unnoticed.
func TestStructSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"deadline", unsafe.Sizeof(deadline{}), 32},
		{"lock", unsafe.Sizeof(lock{}), 112},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, more than its budget of %d", c.name, c.size, c.max)
		}
	}
}
