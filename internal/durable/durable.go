// Package durable writes small files so that a crash or a power loss
// leaves either the old content or the new, never a mix, and never loses
// a rename already reported done.
package durable

import (
	"os"
	"path/filepath"
)

// syncDir is SyncDir, a variable so that this package's tests can make
// the directory's fsync fail.
var syncDir = SyncDir

// SyncDir fsyncs the directory dir, so that files created, renamed or
// removed in it stay so after a power loss. Errors: os.Open's, Sync's or
// Close's (an *os.PathError).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile replaces the file path by data (mode 0644): data is written
// to path+".tmp" and fsynced, the temporary file renamed over path, and
// path's directory fsynced. On any error (an *os.PathError or
// *os.LinkError of the step that failed) the temporary file is removed;
// path then holds its old content or, when only the directory's fsync
// failed, the new content not yet known to survive a power loss.
func WriteFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}
