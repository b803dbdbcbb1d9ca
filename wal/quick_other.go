//go:build !linux || race

package wal

import "os"

// quickFile is quick_linux.go's; here (and under the race detector, whose
// bookkeeping of system calls the raw ones would bypass) none is made,
// and osFile.writeAtQuick is WriteAt.
type quickFile struct{}

func newQuick(*os.File) *quickFile { return nil }

func (*quickFile) writeAt(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }
