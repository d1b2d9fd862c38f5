package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

type lsOptions struct {
	Group string
	JSON  bool
	Color bool
	// Now is the time a worker's last poll is measured to.
	Now time.Time
}

func newLsCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "List running sessions and how full their context is",
		ArgsUsage: "[GROUP]",
		Description: "Lists every running session, or those of GROUP, with its agent, status, turns\n" +
			"and context: \"62% of 200k\" is how full the context window is, \"↻2\" counts\n" +
			"rotations, \"—\" means the agent reports no usage. From 75% the percent is\n" +
			"yellow on a terminal (never with NO_COLOR). HOST is the host it runs on. One\n" +
			"visibility query answers it, or a running nid up of this configuration, which keeps\n" +
			"the same list current. When no worker has asked Temporal for the\n" +
			"sessions' work for two minutes, nothing runs them, and a line on stderr says\n" +
			"that STATUS is what it was when the last worker stopped.",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newLsOptions(args, cCtx.Bool("json"), a.color(a.Stdout))
			if err != nil {
				return err
			}
			opts.Now = time.Now()
			// nid ls is a short process whose one allocation of note is the
			// listing, nearly all of it live until printed: collecting while
			// it arrives frees nothing and took a third of its processor
			// time over a thousand sessions (docs/performance.md). A larger
			// target still collects a listing many times that size. A GOGC
			// the user set stands.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(lsGCPercent)
			}
			cfg, err := a.loadConfig(cCtx)
			if err != nil {
				return err
			}
			if live, ok := liveSessions(cCtx.Context, cfg, opts.Group); ok {
				var note string
				if u := live.Unserved; u != nil {
					note = unservedText(u.LastPoll, opts.Now)
				}
				return printLs(live.Sessions, note, opts, a.Stdout, a.Stderr)
			}
			// The configuration read above serves the dial too: with a
			// thousand sessions in it, reading it is a good part of nid
			// ls's time.
			return a.withDialled(cCtx, cfg, func(ctx context.Context, _ *config.Config, c client.Client) error {
				return runLs(ctx, c, opts, a.Stdout, a.Stderr)
			})
		}),
	}
}

// lsGCPercent is nid ls's garbage collection target (GOGC): the first
// collection comes at 32 MiB of heap rather than 4.
const lsGCPercent = 800

func newLsOptions(args []string, asJSON, color bool) (lsOptions, error) {
	group, err := optionalGroup("ls", args)
	return lsOptions{JSON: asJSON, Color: color && !asJSON, Group: group}, err
}

// lsItem is one session in nid ls --json.
type lsItem struct {
	Session string                  `json:"session"`
	Group   string                  `json:"group"`
	Name    string                  `json:"name"`
	Agent   string                  `json:"agent"`
	Status  string                  `json:"status"`
	Host    string                  `json:"host"`
	Turns   int                     `json:"turns"`
	Context workflows.ContextRecord `json:"context"`
}

func runLs(ctx context.Context, c client.Client, opts lsOptions, stdout, stderr io.Writer) error {
	// Asked beside the list, so that it costs no time of its own.
	unserved := make(chan string, 1)
	go func() { unserved <- unservedNote(ctx, c, opts.Now) }()
	sessions, err := nidclient.Sessions(ctx, c, opts.Group)
	if err != nil {
		return err
	}
	var note string
	if len(sessions) > 0 {
		note = <-unserved
	}
	return printLs(sessions, note, opts, stdout, stderr)
}

// printLs prints the sessions, and after them note on stderr when there
// is one.
func printLs(sessions []nidclient.Session, note string, opts lsOptions, stdout, stderr io.Writer) error {
	if len(sessions) > 0 && note != "" {
		defer fmt.Fprintln(stderr, note)
	}
	if opts.JSON {
		items := make([]lsItem, 0, len(sessions))
		for _, s := range sessions {
			items = append(items, lsItem{
				Session: s.Ref(), Group: s.Group, Name: s.Name, Agent: s.Agent,
				Status: s.Status, Host: s.Host, Turns: s.Context.TotalTurns, Context: s.Context,
			})
		}
		return writeJSON(stdout, items)
	}
	rows := [][]string{{"SESSION", "AGENT", "STATUS", "HOST", "TURNS", "CONTEXT"}}
	for _, s := range sessions {
		rows = append(rows, []string{
			printable(s.Ref(), true), printable(s.Agent, true), printable(s.Status, true), hostText(s.Host),
			strconv.Itoa(s.Context.TotalTurns), contextText(s.Context, opts.Color),
		})
	}
	if err := writeTable(stdout, rows); err != nil {
		return err
	}
	if len(sessions) == 0 {
		if opts.Group != "" {
			fmt.Fprintf(stderr, "no sessions running in %s\n", opts.Group)
		} else {
			fmt.Fprintln(stderr, "no sessions (start some with nid up)")
		}
	}
	return nil
}

// unservedNote says, when no worker has asked for the sessions' work
// lately, that nothing runs them and their listing is stale; it is empty
// otherwise, and when the server will not say (the listing stands alone).
func unservedNote(ctx context.Context, c client.Client, now time.Time) string {
	unserved, since, err := nidclient.Unserved(ctx, c, now)
	if err != nil || !unserved {
		return ""
	}
	return unservedText(since, now)
}

func unservedText(since, now time.Time) string {
	return nidclient.NoWorkerText(since, now) + ", so each STATUS is what the session last wrote: start nid up or nid worker"
}

func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(printableJSON(b.Bytes()))
	return err
}
