package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestFindIsFreeAndOutsideTheEphemeralRange(t *testing.T) {
	for range 20 {
		port, err := Find()
		if err != nil {
			t.Fatal(err)
		}
		if top := ephemeralStart(); top > lowest && (port < lowest || port >= top) {
			t.Fatalf("port %d is outside [%d, %d)", port, lowest, top)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		l.Close()
	}
}
