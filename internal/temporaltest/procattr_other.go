//go:build !linux

package temporaltest

import "syscall"

// dieWithParent is a no-op where the kernel cannot tie a child's life to
// its parent's; Main still stops the server when the tests end.
func dieWithParent() *syscall.SysProcAttr { return nil }
