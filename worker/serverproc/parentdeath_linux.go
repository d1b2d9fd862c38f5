package serverproc

import (
	"os/exec"
	"syscall"
)

// diesWithParent has the kernel kill the child when the thread that starts
// it ends, which Start keeps for the child's life: a parent killed with
// SIGKILL cannot close anything itself.
func diesWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
