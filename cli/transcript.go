package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

// transcriptInterval is how often --follow looks for new entries.
const transcriptInterval = 500 * time.Millisecond

type transcriptOptions struct {
	Group, Name string
	// Lines is how many past entries to show first; 0 shows all.
	Lines    int
	Follow   bool
	JSON     bool
	Interval time.Duration
}

func newTranscriptCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "transcript",
		Usage:     "Show a session's turns across all its conversations, rotations marked ↻",
		ArgsUsage: "GROUP/SESSION",
		Description: "Prints the session's transcript: each prompt (>), tool call (·) and output (<),\n" +
			"failures (✗), and each rotation as a marked line (↻ compact, ↻ handoff with the\n" +
			"summary the fresh conversation started from), across every vendor conversation\n" +
			"the session has had. Transcripts are files the worker writes under the state\n" +
			"directory, so run this on the host where nid up or nid worker runs the\n" +
			"session. --follow keeps printing new entries until Ctrl-C; --json prints one\n" +
			"entry object per line.\n\n" +
			"   nid transcript web/lead -n 20 --follow",
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "Keep printing new entries until Ctrl-C"},
			&cli.IntFlag{Name: "lines", Aliases: []string{"n"}, Usage: "Show the last `N` entries first (0: all)"},
		},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newTranscriptOptions(args, cCtx.Int("lines"), cCtx.Bool("follow"), cCtx.Bool("json"))
			if err != nil {
				return err
			}
			cfg, err := a.loadConfig(cCtx)
			if err != nil {
				return err
			}
			return runTranscript(cCtx.Context, transcript.New(cfg.State), opts, a.Stdout)
		}),
	}
}

func newTranscriptOptions(args []string, lines int, follow, asJSON bool) (transcriptOptions, error) {
	if len(args) != 1 {
		return transcriptOptions{}, fmt.Errorf("nid transcript takes one GROUP/SESSION, e.g. nid transcript web/lead (got %d arguments)", len(args))
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return transcriptOptions{}, err
	}
	if lines < 0 {
		return transcriptOptions{}, fmt.Errorf("--lines %d: give a number of entries, 0 for all", lines)
	}
	return transcriptOptions{Group: group, Name: name, Lines: lines, Follow: follow, JSON: asJSON, Interval: transcriptInterval}, nil
}

// runTranscript prints the transcript, then with Follow every new entry
// until ctx is cancelled.
func runTranscript(ctx context.Context, log *transcript.Log, opts transcriptOptions, stdout io.Writer) error {
	entries, err := log.Tail(opts.Group, opts.Name, opts.Lines)
	if err != nil {
		return err
	}
	if len(entries) == 0 && !opts.Follow {
		err := fmt.Errorf("no transcript for %s/%s at %s: it is written on the host that runs the session", opts.Group, opts.Name, log.Path(opts.Group, opts.Name))
		if here, _ := log.Sessions(); len(here) > 0 {
			err = fmt.Errorf("%w; transcripts on this host: %s", err, strings.Join(here, ", "))
		}
		return err
	}
	p := &transcriptPrinter{w: stdout, json: opts.JSON}
	if err := p.print(entries); err != nil {
		return err
	}
	for opts.Follow {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Interval):
		}
		entries, err := log.Read(opts.Group, opts.Name, p.last)
		if err != nil {
			return err
		}
		if err := p.print(entries); err != nil {
			return err
		}
	}
	return nil
}

type transcriptPrinter struct {
	w    io.Writer
	json bool
	last int64
	// conversation is the last one shown, so a change gets a header line.
	conversation string
}

func (p *transcriptPrinter) print(entries []transcript.Entry) error {
	for i, e := range entries {
		p.last = max(p.last, e.Seq)
		if p.json {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%s\n", printableJSON(b)); err != nil {
				return err
			}
			continue
		}
		if c := opens(entries[i:]); c != "" && c != p.conversation {
			if err := printLine(p.w, "── conversation %s", c); err != nil {
				return err
			}
			p.conversation = c
		}
		e.At = e.At.Local()
		if _, err := fmt.Fprintln(p.w, printable(transcript.Line(e), false)); err != nil {
			return err
		}
	}
	return nil
}

// opens is the conversation the first of entries belongs to, "" for a
// rotation's mark (which ends one and starts the next). A turn's prompt is
// written before the agent names its conversation, so a first prompt
// belongs to the conversation of the entries that follow it: its header
// goes above the prompt, not below.
func opens(entries []transcript.Entry) string {
	for _, e := range entries {
		switch {
		case e.Kind == transcript.KindRotation:
			return ""
		case e.Conversation != "":
			return e.Conversation
		}
	}
	return ""
}
