package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// temporalAnswers says nid doctor found a Temporal server running: a
// cluster that answers, or the embedded server of the nid running here
// (before nid up there is no server, only its ports).
func temporalAnswers(opts doctorOptions, checks []agents.Check) bool {
	cfg := opts.Doctor.Config
	if cfg == nil || (cfg.Embedded() && opts.Doctor.Running == 0) {
		return false
	}
	for _, c := range checks {
		if c.Name == "temporal" && c.Status != agents.CheckOK {
			return false
		}
	}
	return true
}

// readRungs dials the configuration's Temporal and reads the rungs of its
// running workflows.
func readRungs(ctx context.Context, opts doctorOptions) (nidclient.Rungs, error) {
	cfg := opts.Doctor.Config
	// What went wrong is said once, by the caller.
	c, err := opts.Dial(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nidclient.Rungs{}, err
	}
	defer c.Close()
	return nidclient.ReadRungs(ctx, c, cfg.Temporal.Namespace)
}

// rungsCheck is nid doctor's line about the rungs running workflows follow.
func rungsCheck(ctx context.Context, opts doctorOptions) agents.Check {
	r, err := readRungs(ctx, opts)
	if err != nil {
		return agents.Check{Name: "rungs", Status: agents.CheckWarn,
			Text: fmt.Sprintf("which rungs of the version ladder the running workflows follow is unknown: %v", err)}
	}
	return agents.Check{Name: "rungs", Status: agents.CheckOK, Text: rungsText(r, opts.Doctor.Config.Temporal.Namespace)}
}

// rungsText says which rungs the running workflows follow, the oldest
// first, for it is the one whose code must stay.
func rungsText(r nidclient.Rungs, namespace string) string {
	known := 0
	for _, c := range r.Counts {
		known += c.Workflows
	}
	var text string
	switch {
	case len(r.Workflows) == 0:
		return fmt.Sprintf("no nid workflow runs in namespace %s: none needs a rung older than %s, this nid's newest", namespace, rungName(r.Latest))
	case known == 0:
		text = fmt.Sprintf("no running workflow has started yet: each will follow rung %s, this nid's newest", rungName(r.Latest))
	case len(r.Counts) == 1 && *r.Oldest == r.Latest:
		text = fmt.Sprintf("every running workflow (%d) follows rung %s, this nid's newest", known, rungName(r.Latest))
	default:
		oldest := r.Counts[0]
		text = fmt.Sprintf("the oldest rung of the version ladder a running workflow follows is %s (%d of %d; this nid's newest is %s): nid doctor --rungs lists each",
			rungName(oldest.Rung), oldest.Workflows, known, rungName(r.Latest))
	}
	if n := len(r.Workflows) - known; n > 0 && known > 0 {
		text += fmt.Sprintf("; %d not started yet will follow %s", n, rungName(r.Latest))
	}
	return text
}

// rungName is how a rung is written: its number, or "initial" for the
// first release's, which the ladder numbers -1.
func rungName(v workflows.Version) string {
	if v == workflows.VersionInitial {
		return "initial"
	}
	return strconv.Itoa(int(v))
}

// runRungs prints each running workflow with the rung it follows, oldest
// first, then the line nid doctor says about them.
func runRungs(ctx context.Context, opts doctorOptions, stdout io.Writer) error {
	cfg := opts.Doctor.Config
	if cfg == nil {
		return fmt.Errorf("nid doctor --rungs needs a configuration that loads: %v", opts.Problems)
	}
	if cfg.Embedded() && opts.Doctor.Running == 0 {
		return fmt.Errorf("no nid runs on %s, so no workflow runs: start nid up, then run nid doctor --rungs again", cfg.State)
	}
	r, err := readRungs(ctx, opts)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, r)
	}
	rows := [][]string{{"RUNG", "FROM", "TYPE", "WORKFLOW"}}
	for _, w := range r.Workflows {
		rung, from := "-", "not started"
		if w.Rung != nil {
			rung, from = rungName(*w.Rung), w.From
		}
		rows = append(rows, []string{rung, from, w.Type, printable(w.ID, true)})
	}
	if err := writeTable(stdout, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, rungsText(r, cfg.Temporal.Namespace))
	return err
}
