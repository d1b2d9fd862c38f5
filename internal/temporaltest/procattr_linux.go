package temporaltest

import "syscall"

// dieWithParent has the kernel kill the server when the test binary dies
// without stopping it (go test's timeout, a crash), so no server outlives
// the tests.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
