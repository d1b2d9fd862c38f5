//go:build linux

package cli

import (
	"os/exec"
	"syscall"
)

// endWithNidAttach has the kernel hang the attached command up when nid
// attach dies, however it dies: killed with -9 in a person's shell, nid
// attach leaves the CLI it started running in the terminal on the
// session's conversation, which the session takes back within its lease
// and goes on with, two writers on one conversation. A hang-up is what a
// lost terminal sends: the CLI saves what it holds and exits. The kernel
// sends it when the thread that started the command ends, so runInTerminal
// keeps that thread until the command exits.
func endWithNidAttach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGHUP
}
