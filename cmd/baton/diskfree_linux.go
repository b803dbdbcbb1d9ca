package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// diskFree is the room left for the node's user on the file system of
// dir, in bytes (root may also use the blocks reserved for it); false
// where it cannot be told.
func diskFree(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	blocks := st.Bavail
	if os.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return blocks * uint64(st.Bsize), true
}
