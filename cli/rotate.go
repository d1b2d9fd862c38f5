package cli

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

type rotateOptions struct {
	Group string
	Name  string
	// Mode is empty for the group's mode (auto when the group says off).
	Mode string
}

func newRotateCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "rotate",
		Usage:     "Rotate a session's conversation: compact it or hand off to a fresh one",
		ArgsUsage: "GROUP/SESSION",
		Description: "Asks the session to rotate with --mode, else its group's mode (auto when the\n" +
			"group says off). An idle session rotates at once; a working or rate-limited one\n" +
			"when its current turn ends. Asking again before it runs joins the same rotation.\n\n" +
			"   nid rotate web/worker\n" +
			"   nid rotate web/worker --mode handoff",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Usage: "Rotate by `MODE`: auto (compact, else hand off), compact or handoff"},
		},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newRotateOptions(args, cCtx.String("mode"), cCtx.IsSet("mode"))
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runRotate(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

// rotateModes are the methods nid rotate may ask for.
var rotateModes = []string{config.ModeAuto, config.ModeCompact, config.ModeHandoff}

func newRotateOptions(args []string, mode string, modeSet bool) (rotateOptions, error) {
	if len(args) != 1 {
		return rotateOptions{}, fmt.Errorf("nid rotate takes one GROUP/SESSION, e.g. nid rotate web/lead (got %d arguments)", len(args))
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return rotateOptions{}, err
	}
	if modeSet && !slices.Contains(rotateModes, mode) {
		return rotateOptions{}, fmt.Errorf("--mode %q is not a rotation mode: use auto, compact or handoff", mode)
	}
	return rotateOptions{Group: group, Name: name, Mode: mode}, nil
}

func runRotate(ctx context.Context, c client.Client, opts rotateOptions, stdout io.Writer) error {
	ref := opts.Group + "/" + opts.Name
	view, err := querySession(ctx, c, opts.Group, opts.Name)
	if isNotFound(err) {
		return unknownSession(ctx, c, opts.Group, opts.Name)
	}
	if err != nil {
		return notAnswering(ref, err)
	}
	req := workflows.RotateRequest{Mode: opts.Mode, Reason: workflows.ReasonManual}
	if err := c.SignalWorkflow(ctx, workflows.SessionID(opts.Group, opts.Name), "", workflows.SignalRotate, req); err != nil {
		if isNotFound(err) {
			return unknownSession(ctx, c, opts.Group, opts.Name)
		}
		return fmt.Errorf("asking %s to rotate: %w", ref, err)
	}
	_, err = fmt.Fprintln(stdout, rotateOutcome(ref, opts.Mode, view))
	return err
}

// rotateOutcome says what the session will do with the request, as its
// workflow decides it: a request made while one is pending or running joins
// it; an idle session rotates at once; a busy one when its turn ends.
func rotateOutcome(ref, mode string, v workflows.SessionView) string {
	switch {
	case v.Status == workflows.StatusRotating:
		return fmt.Sprintf("%s is rotating now: this request joins that rotation", ref)
	case v.HandoffPending:
		return fmt.Sprintf("%s wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it", ref)
	case v.PendingRotate != nil:
		if mode == "" {
			mode = v.PendingRotate.Mode
		}
		return fmt.Sprintf("a rotation is already pending for %s: this request joins it (%s); it runs when the current turn ends", ref, effectiveMode(mode, v.Policy))
	case v.Status == workflows.StatusWorking || v.Status == workflows.StatusRateLimited:
		return fmt.Sprintf("%s is %s: it rotates (%s) when the current turn ends", ref, v.Status, effectiveMode(mode, v.Policy))
	default:
		return fmt.Sprintf("rotating %s now (%s)", ref, effectiveMode(mode, v.Policy))
	}
}

// effectiveMode is the method a manual rotation runs: the one asked for,
// else the group's, else auto when the group says off.
func effectiveMode(mode string, policy config.Rotate) string {
	switch {
	case mode != "":
		return mode
	case policy.Mode == "" || policy.Mode == config.ModeOff:
		return config.ModeAuto
	default:
		return policy.Mode
	}
}
