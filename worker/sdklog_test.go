package worker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSDKOutageIsOneLineInWords(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:7233: connect: connection refused\"")
	tests := []struct {
		name  string
		level slog.Level
		log   func(l sdklog.Logger)
		want  []string
	}{
		{
			name:  "every poller failing at once",
			level: slog.LevelWarn,
			log: func(l sdklog.Logger) {
				for i := range 8 {
					sdklog.With(l, "TaskQueue", "nid", "Poller", i).Warn(sdkPollFailed, "Error", unavailable)
				}
				l.Warn(sdkPollFailed, "Error", serviceerror.NewUnavailable("closing transport due to: connection error"))
				l.Warn(sdkHeartbeatFailed, "Error", unavailable)
			},
			want: []string{`level=WARN msg="this worker cannot take work from Temporal at 127.0.0.1:7233: it does not answer; it keeps trying, and says so again in 10 minutes if it still cannot"`},
		},
		{
			name:  "a poll refused for another reason",
			level: slog.LevelWarn,
			log: func(l sdklog.Logger) {
				l.Warn(sdkPollFailed, "Error", errors.New("namespace default is not found"))
			},
			want: []string{`msg="this worker cannot take work from Temporal at 127.0.0.1:7233: namespace default is not found; it keeps trying`},
		},
		{
			name:  "the SDK's own lines at debug",
			level: slog.LevelDebug,
			log: func(l sdklog.Logger) {
				l.Warn(sdkPollFailed, "Error", unavailable)
				l.Warn(sdkHeartbeatFailed, "Error", unavailable)
			},
			want: []string{
				`level=WARN msg="this worker cannot take work`,
				`level=DEBUG msg="Failed to poll for task."`,
				`level=DEBUG msg="RecordActivityHeartbeat with error"`,
			},
		},
		{
			name:  "anything else as the SDK said it",
			level: slog.LevelWarn,
			log: func(l sdklog.Logger) {
				l.Warn("Workflow panic", "Error", errors.New("boom"))
			},
			want: []string{`level=WARN msg="Workflow panic" Error=boom`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tt.level})
			tt.log(sdklog.NewStructuredLogger(slog.New(newSDKHandler(h, "127.0.0.1:7233"))))
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, len(tt.want), out.String())
			for i, want := range tt.want {
				require.Contains(t, lines[i], want)
			}
			require.NotContains(t, out.String(), "Poller=", "the worded line is the process's, not one poller's")
		})
	}
}

func TestSpokenDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Minute:        "10 minutes",
		time.Minute:             "1 minute",
		10 * time.Second:        "10 seconds",
		2 * time.Hour:           "2 hours",
		90 * time.Second:        "90 seconds",
		1500 * time.Millisecond: "1.5s",
	} {
		require.Equal(t, want, spoken(d))
	}
}
