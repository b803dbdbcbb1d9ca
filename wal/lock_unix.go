//go:build unix

package wal

import (
	"errors"
	"os"
	"syscall"
)

// platformError is nil where the log can be kept safe (see ErrUnsupported).
func platformError() error { return nil }

// lockFile takes the exclusive flock(2) of f without waiting; busy reports
// that another holder has it.
func lockFile(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK), err
}
