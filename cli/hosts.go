package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
)

type hostsOptions struct {
	JSON bool
	// Now is the time "seen" is measured to.
	Now time.Time
}

func newHostsCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "hosts",
		Usage:     "List the hosts sessions run on: their sessions, capacity and whether each is alive",
		ArgsUsage: " ",
		Description: "Lists every host a worker registered under (nid up, nid worker --host NAME),\n" +
			"or a session was pinned to: whether it is alive (its worker beat within three\n" +
			"heartbeats), when it last beat, its running sessions against its capacity\n" +
			"(worker.maxSessions), and the sessions placed there (a stopped one keeps its\n" +
			"place and takes no capacity). A down host's sessions wait for it (status\n" +
			"host-down).",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				return fmt.Errorf("nid hosts takes no arguments (got %q)", args[0])
			}
			opts := hostsOptions{JSON: cCtx.Bool("json"), Now: time.Now()}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runHosts(ctx, c, opts, a.Stdout, a.Stderr)
			})
		}),
	}
}

func runHosts(ctx context.Context, c client.Client, opts hostsOptions, stdout, stderr io.Writer) error {
	v, err := nidclient.Hosts(ctx, c)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, v.Hosts)
	}
	rows := [][]string{{"HOST", "ALIVE", "SEEN", "SESSIONS", "FREE", "PLACED"}}
	for _, h := range v.Hosts {
		alive, seen := "no", "never"
		if h.Alive {
			alive = "yes"
		}
		if !h.LastSeen.IsZero() {
			seen = nidclient.HostSeenAgo(h, opts.Now).String() + " ago"
		}
		placed := make([]string, 0, len(h.Sessions))
		for _, s := range h.Sessions {
			if slices.Contains(h.Stopped, s) {
				s += " (stopped)"
			}
			placed = append(placed, s)
		}
		rows = append(rows, []string{
			printable(h.Name, true), alive, seen,
			fmt.Sprintf("%d/%d", len(h.Sessions)-len(h.Stopped), h.MaxSessions), freeText(h.Free),
			printable(strings.Join(placed, " "), true),
		})
	}
	if err := writeTable(stdout, rows); err != nil {
		return err
	}
	if len(v.Hosts) == 0 {
		fmt.Fprintln(stderr, "no hosts (nid up and nid worker register theirs)")
	}
	return nil
}

// freeText is a host's FREE cell: a host every other host is fuller than
// takes sessions past its capacity, and says by how many.
func freeText(free int) string {
	if free < 0 {
		return fmt.Sprintf("0 (%d over)", -free)
	}
	return strconv.Itoa(free)
}

// hostText is a session's HOST cell: its host, or — for a session placed
// before hosts.
func hostText(host string) string {
	if host == "" {
		return "—"
	}
	return printable(host, true)
}
