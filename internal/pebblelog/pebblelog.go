package pebblelog

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// Quiet drops Pebble's informational messages and writes its errors, one
// line each prefixed "pebble: ", to Errors (nil: drops them too). Fatalf
// writes the message likewise and panics, since Pebble never expects it to
// return; a pebblestore.Store never calls it (it turns Pebble's fatal
// errors into a failed store).
type Quiet struct {
	Errors io.Writer
}

var _ pebble.Logger = Quiet{}

// Infof implements pebble.Logger.
func (Quiet) Infof(string, ...any) {}

// Errorf implements pebble.Logger.
func (q Quiet) Errorf(format string, args ...any) {
	if q.Errors != nil {
		fmt.Fprintf(q.Errors, "pebble: "+format+"\n", args...)
	}
}

// Fatalf implements pebble.Logger.
func (q Quiet) Fatalf(format string, args ...any) {
	q.Errorf("fatal: "+format, args...)
	panic(fmt.Sprintf("pebble: fatal: "+format, args...))
}
