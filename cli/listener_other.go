//go:build !linux

package cli

import "net"

// listenerUID cannot tell who listens where the kernel's socket tables are
// not at hand: nid ls then asks Temporal itself.
func listenerUID(net.IP, string) (int, bool) { return 0, false }
