package serverproc

import (
	"os"
	"syscall"
	"unsafe"
)

// release tells the kernel that b, read-only data of nid's own executable,
// is not needed now: its pages leave the process's resident set and are
// read from the file again if touched. Only the pages wholly inside b are
// released.
func release(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + page - 1) &^ (page - 1)
	last := (start + uintptr(len(b))) &^ (page - 1)
	if last <= first {
		return
	}
	_ = syscall.Madvise(b[first-start:last-start], syscall.MADV_DONTNEED)
}
