package cli

import (
	"fmt"
	"strings"

	"github.com/nid-dev/nid/workflows"
)

// validGroup checks a GROUP argument.
func validGroup(g string) error {
	if !workflows.ValidName(g) {
		return fmt.Errorf("%q is not a group name: use lower-case letters, digits, - and _", g)
	}
	return nil
}

// optionalGroup reads the [GROUP] argument of a command.
func optionalGroup(command string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		if err := validGroup(args[0]); err != nil {
			return "", err
		}
		return args[0], nil
	default:
		return "", fmt.Errorf("too many arguments: nid %s takes at most one GROUP", command)
	}
}

// groupOrSession reads a GROUP or GROUP/SESSION argument; name is empty
// for a group.
func groupOrSession(arg string) (group, name string, err error) {
	if strings.Contains(arg, "/") {
		return workflows.ParseSessionRef(arg)
	}
	return arg, "", validGroup(arg)
}
