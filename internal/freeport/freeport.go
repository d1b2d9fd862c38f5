// Package freeport finds loopback TCP ports for servers that must be told
// their port before they bind it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest keeps clear of the ports well-known services listen on.
const lowest = 20000

// Find returns a loopback port that was free a moment ago. It looks below
// the kernel's ephemeral range: a port the kernel hands out for port 0 is
// the kind it also gives the next outgoing connection, so on a busy machine
// some other process's dial takes it between the check and the bind.
func Find() (int, error) {
	if top := ephemeralStart(); top > lowest {
		for range 200 {
			port := lowest + rand.IntN(top-lowest)
			if free(port) {
				return port, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// ephemeralStart is the first port of the kernel's ephemeral range, or 0
// where the kernel does not say.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return n
}
