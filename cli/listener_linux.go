package cli

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
)

// listenerUID is the user id of the socket listening on ip and port (or on
// every address and port), read from the kernel's socket tables.
func listenerUID(ip net.IP, port string) (uid int, found bool) {
	want, err := strconv.ParseUint(port, 10, 16)
	if err != nil || ip == nil {
		return 0, false
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, found := listenerIn(table, ip, uint16(want)); found {
			return uid, true
		}
	}
	return 0, false
}

// listenerIn reads one table, whose lines are "sl local rem st ... uid ...",
// the local address as hex ip:port and st 0A for a listening socket.
func listenerIn(table string, ip net.IP, port uint16) (int, bool) {
	f, err := os.Open(table)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[3] != "0A" {
			continue
		}
		addr, portHex, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil || uint16(p) != port {
			continue
		}
		local := kernelIP(addr)
		if local == nil || !(local.Equal(ip) || local.IsUnspecified()) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			continue
		}
		return uid, true
	}
	return 0, false
}

// kernelIP decodes an address as the socket tables print it: the bytes of
// each 32-bit word in the machine's order, which is little-endian on every
// architecture nid is built for.
func kernelIP(s string) net.IP {
	raw, err := hex.DecodeString(s)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.IP(raw)
}
