package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-io/baton/internal/durable"
)

// newestName is the file in the log's directory that names the newest
// segment the log has begun, by its file name and a newline: a newest
// segment removed from the directory is then told at start from one never
// begun (load). A log's own files cannot tell: every segment before the
// newest ends where the next begins, and the newest ends wherever its last
// write did. The name is a lower bound of what the directory holds: it is
// raised only once a segment is durably begun (cut, Install, Open) and
// lowered before segments are removed (Install), so no crash leaves it
// naming a segment that was never there. A directory without it (a log
// that predates it, or a new one) is not checked.
const newestName = "newest-segment"

// Began reports whether dir holds the file that names the newest segment
// of a log, which a log writes only once it has begun a segment there:
// evidence, for Config.Existed, that dir held a log.
func Began(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, newestName))
	return err == nil
}

// readNewest returns the first index of the segment newestName names, 0
// when the file does not exist. Errors: a *CorruptError naming the file
// when its content is not a segment's name; the read's.
func (l *Log) readNewest() (uint64, error) {
	path := l.path(newestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err) // names the file
	}
	first, ok := parseName(strings.TrimSuffix(string(b), "\n"), segmentExt)
	if !ok || !strings.HasSuffix(string(b), "\n") {
		return 0, &CorruptError{File: path, Reason: fmt.Sprintf("it must hold a segment's file name and a newline (like %q), not %q", fileName(1, segmentExt)+"\n", b),
			Hint: l.cfg.RepairHint, Anyway: "to start anyway (no record is dropped; a newest segment removed goes unseen at that start, and the file is written again)"}
	}
	return first, nil
}

// setNewest makes newestName name the segment whose first index is first
// (durably: durable.WriteFile), unless it already does. Errors:
// durable.WriteFile's.
func (l *Log) setNewest(first uint64) error {
	l.newestMu.Lock()
	defer l.newestMu.Unlock()
	return l.setNewestLocked(first)
}

// lowerNewest is setNewest(first) when first is below the segment
// newestName names: before segments from first on are removed (Install).
func (l *Log) lowerNewest(first uint64) error {
	l.newestMu.Lock()
	defer l.newestMu.Unlock()
	if l.newest <= first {
		return nil
	}
	return l.setNewestLocked(first)
}

// setNewestLocked is setNewest with l.newestMu held.
func (l *Log) setNewestLocked(first uint64) error {
	if first == l.newest {
		return nil
	}
	if err := durable.WriteFile(l.path(newestName), []byte(fileName(first, segmentExt)+"\n")); err != nil {
		// The file may hold first all the same (only the directory's
		// fsync failed): a removal must lower it from there.
		l.newest = max(l.newest, first)
		return err
	}
	l.newest = first
	return nil
}
