//go:build !linux

package serverproc

import "os/exec"

// diesWithParent does nothing where the kernel cannot tie the child's life
// to its parent's: the child exits when its stdin ends instead.
func diesWithParent(*exec.Cmd) {}
