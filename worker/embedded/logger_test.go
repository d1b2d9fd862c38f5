package embedded

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/rpc/interceptor"
)

// The server derives a logger per request and task and logs only a few
// errors: a line carries every tag of the loggers it came through, and two
// loggers derived from one never see each other's tags.
func TestTheServersLoggerKeepsEachLoggersOwnTags(t *testing.T) {
	var out bytes.Buffer
	base := errorLogger{log: slog.New(slog.NewTextHandler(&out, nil))}
	// Three tags, as the server's service loggers carry: room to spare in
	// the slice behind them.
	service := log.With(log.With(base, tag.NewStringTag("service", "history"), tag.NewStringTag("host", "vm")), tag.NewStringTag("shard", "1"))
	one := log.With(service, tag.NewStringTag("wf-id", "nid/web/lead"))
	two := log.With(service, tag.NewStringTag("wf-id", "nid/web/other"))
	one.Info("dropped")
	one.Error("persistence failed")
	two.Error("persistence failed", tag.NewStringTag("attempt", "2"))
	require.Equal(t, `level=ERROR msg="persistence failed" service=history host=vm shard=1 wf-id=nid/web/lead
level=ERROR msg="persistence failed" service=history host=vm shard=1 wf-id=nid/web/other attempt=2
`, stripTime(out.String()))

	// A long poll abandoned by a stopping worker is not an error, wherever
	// the cause sits.
	out.Reset()
	log.With(service, tag.Error(context.Canceled)).Error("poll ended")
	service.Error("poll ended", tag.Error(errors.New("wrapped: "+context.Canceled.Error())))
	require.Empty(t, out.String())
}

// A "busy, try again" answer inside an update-with-start's answer is the
// caller's to retry, as the server means any such answer to be; a fault the
// server answers with still reaches the log. The lines come from the
// server's own error handler, so a change of its wording fails here.
func TestTheServersBusyAnswersAreNotLoggedAsErrors(t *testing.T) {
	var out bytes.Buffer
	handler := interceptor.NewRequestErrorHandler(errorLogger{log: slog.New(slog.NewTextHandler(&out, nil))},
		dynamicconfig.GetBoolPropertyFnFilteredByNamespace(false))
	answer := func(err error) {
		handler.HandleError(nil, "/temporal.api.workflowservice.v1.WorkflowService/ExecuteMultiOperation",
			metrics.NoopMetricsHandler, []tag.Tag{tag.Operation("ExecuteMultiOperation")}, err, "default")
	}

	closing := serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW,
		"workflow operation can not be applied because workflow is closing")
	answer(serviceerror.NewMultiOperationExecution("Update-with-Start could not be executed.",
		[]error{serviceerror.NewMultiOperationAborted("Operation was aborted."), closing}))
	answer(closing)
	require.Empty(t, out.String())

	answer(serviceerror.NewMultiOperationExecution("Update-with-Start could not be executed.",
		[]error{serviceerror.NewInternal("persistence failed"), serviceerror.NewMultiOperationAborted("Operation was aborted.")}))
	require.Contains(t, out.String(), `level=ERROR msg="service failures" operation=ExecuteMultiOperation grpc_code=Internal`)
}

func stripTime(logs string) string {
	var out []string
	for _, line := range strings.SplitAfter(logs, "\n") {
		if _, rest, ok := strings.Cut(line, " "); ok && strings.HasPrefix(line, "time=") {
			line = rest
		}
		out = append(out, line)
	}
	return strings.Join(out, "")
}
