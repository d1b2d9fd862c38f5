package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/worker"
)

type doctorOptions struct {
	Doctor worker.DoctorOptions
	// Problems are those of the configuration itself, each a failed
	// check of its own.
	Problems []string
	JSON     bool
	// Rungs asks for the rungs of the version ladder that the running
	// workflows follow, each workflow on a line, instead of the checks.
	Rungs bool
	// Dial connects to Temporal, for the rungs.
	Dial func(ctx context.Context, cfg *config.Config, logger *slog.Logger) (client.Client, error)
}

func newDoctorCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "Check that this host can run nid up and every session in nid.yaml",
		ArgsUsage: " ",
		Description: "Checks, for the configuration in force: Temporal answers (or, for the embedded\n" +
			"server, its ports are free), the credential nid's own Temporal server requires\n" +
			"is in the state directory, private, and accepted, the state directory is writable, git is installed\n" +
			"when a group has repo:, each session's agent CLI is found (with its version, and\n" +
			"whether nid is tested with it), it has credentials (a key in its environment or\n" +
			"a login under its home; no secret is printed), the sandbox its permissions ask\n" +
			"for works here, and the HTTP port is free. One line per check: ok, or what to\n" +
			"do. Exits non-zero when a check failed: some session cannot start. Every turn\n" +
			"makes the session checks before its agent starts; nid up names the sessions\n" +
			"that fail them, which wait in needs-attention. A configuration with problems\n" +
			"is checked all the same: each problem is a failed line of its own, beside the\n" +
			"other checks. While Temporal runs (nid up, or a cluster), a last line says the\n" +
			"oldest rung of nid's workflow version ladder that a running session, group or\n" +
			"rotation still follows: the code of older rungs can go once none does. With\n" +
			"--rungs, nid doctor lists each running workflow and its rung instead.",
		Flags: []cli.Flag{jsonFlag(), &cli.BoolFlag{Name: "rungs", Usage: "list each running workflow and the rung of the version ladder it follows"}},
		Action: action(func(cCtx *cli.Context) error {
			if err := noArgs(cCtx); err != nil {
				return err
			}
			// A configuration with problems is checked all the same: its
			// problems are failed checks beside every other one.
			load := a.loadOptions(cCtx, false)
			load.Partial = true
			cfg, err := config.Load(load)
			problems := config.Problems(err)
			if err != nil && problems == nil {
				return err
			}
			opts := doctorOptions{Doctor: worker.DoctorOptions{Config: cfg}, Problems: problems, JSON: cCtx.Bool("json"),
				Rungs: cCtx.Bool("rungs"), Dial: a.Dial}
			if r, err := readRunning(cfg.State); err == nil {
				opts.Doctor.Running = r.PID
			}
			return runDoctor(cCtx.Context, opts, a.Stdout)
		}),
	}
}

// runDoctor prints every check and fails when one did.
func runDoctor(ctx context.Context, opts doctorOptions, stdout io.Writer) error {
	if opts.Rungs {
		return runRungs(ctx, opts, stdout)
	}
	var checks []agents.Check
	for _, p := range opts.Problems {
		checks = append(checks, agents.Check{Name: "config", Status: agents.CheckFail, Text: p})
	}
	checks = append(checks, worker.Doctor(ctx, opts.Doctor)...)
	if temporalAnswers(opts, checks) {
		checks = append(checks, rungsCheck(ctx, opts))
	}
	if opts.JSON {
		if err := writeJSON(stdout, checks); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(checks))
		for _, c := range checks {
			what := c.Name
			if c.Session != "" {
				what = c.Session + " " + c.Name
			}
			rows = append(rows, []string{c.Status, printable(what, true), printable(c.Text, true)})
		}
		if err := writeTable(stdout, rows); err != nil {
			return err
		}
	}
	if failed := agents.Failing(checks); len(failed) > 0 {
		return fmt.Errorf("%d of %d checks failed: mend what %s, then run nid doctor again", len(failed), len(checks), says(len(failed)))
	}
	return nil
}

// says is what the failed lines do.
func says(n int) string {
	if n == 1 {
		return "its line says"
	}
	return "their lines say"
}
