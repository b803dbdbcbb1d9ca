package wal

import (
	"fmt"
	"os"
)

// platformError is ErrUnsupported on Windows: the log relies on fsync of
// its directory (a renamed or created file survives a power loss), on
// removing and renaming files that are still open, and on flock(2); none
// of them has a tested equivalent here, so Open refuses rather than keep
// a log that may lose acknowledged grants.
func platformError() error {
	return fmt.Errorf("%w (windows: no directory fsync, no rename or removal of open files)", ErrUnsupported)
}

// lockFile is never reached on Windows (Open stops at platformError).
func lockFile(*os.File) (busy bool, err error) { return false, platformError() }
