package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/worker"
)

type doctorOptions struct {
	Doctor worker.DoctorOptions
	JSON   bool
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
			"that fail them, which wait in needs-attention.",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			if err := noArgs(cCtx); err != nil {
				return err
			}
			cfg, err := a.loadConfig(cCtx)
			if err != nil {
				return err
			}
			opts := doctorOptions{Doctor: worker.DoctorOptions{Config: cfg}, JSON: cCtx.Bool("json")}
			if r, err := readRunning(cfg.State); err == nil {
				opts.Doctor.Running = r.PID
			}
			return runDoctor(cCtx.Context, opts, a.Stdout)
		}),
	}
}

// runDoctor prints every check and fails when one did.
func runDoctor(ctx context.Context, opts doctorOptions, stdout io.Writer) error {
	checks := worker.Doctor(ctx, opts.Doctor)
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
	if failed := activities.Failing(checks); len(failed) > 0 {
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
