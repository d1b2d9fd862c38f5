package serverproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nid-dev/nid/worker"
)

// Serve is the child's side: it reads the options from in, starts the server
// with start, answers on out, and logs to logs as JSON lines. It returns once
// the parent asked it to stop or SIGTERM came, having stopped the server, or
// at once when its input ends (the parent is gone); the caller then exits.
func Serve(start worker.StartEmbedded, in io.Reader, out, logs io.Writer) error {
	// Ctrl-C at a terminal reaches the whole foreground process group: the
	// parent shuts its workers down first and then stops the server, which
	// must keep serving until then.
	signal.Ignore(os.Interrupt)
	terminated := make(chan os.Signal, 1)
	signal.Notify(terminated, syscall.SIGTERM)
	defer signal.Stop(terminated)

	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	requests := bufio.NewScanner(in)
	requests.Buffer(make([]byte, 64*1024), 1<<20)
	answer := json.NewEncoder(out)
	if !requests.Scan() {
		return fmt.Errorf("no options on standard input: %v", requests.Err())
	}
	var got options
	if err := json.Unmarshal(requests.Bytes(), &got); err != nil {
		return answer.Encode(reply{Error: fmt.Sprintf("the options are not JSON: %v", err)})
	}
	opts := worker.EmbeddedOptions{
		StateDir: got.StateDir, Namespace: got.Namespace, Port: got.Port, UIPort: got.UIPort,
		UIWriteActions: got.UIWriteActions, APIToken: got.APIToken,
		SearchAttributes: map[string]enumspb.IndexedValueType{}, Logger: logger,
	}
	for name, typ := range got.SearchAttributes {
		opts.SearchAttributes[name] = enumspb.IndexedValueType(typ)
	}
	srv, err := start(context.Background(), opts)
	if err != nil {
		return answer.Encode(reply{Error: err.Error()})
	}
	if err := answer.Encode(reply{Frontend: srv.FrontendAddress(), UI: srv.UIAddress()}); err != nil {
		return err
	}

	incoming := make(chan request)
	go func() {
		defer close(incoming)
		for requests.Scan() {
			var r request
			if json.Unmarshal(requests.Bytes(), &r) == nil {
				incoming <- r
			}
		}
	}()
	for {
		select {
		case r, ok := <-incoming:
			if !ok {
				// The parent is gone without asking: the server goes as it
				// would have gone with it, at once, leaving its port and
				// database to the next nid up. SQLite's journal recovers.
				return nil
			}
			switch r.Op {
			case opLoginLink:
				_ = answer.Encode(reply{Link: srv.UILoginLink()})
			case opStop:
				err := srv.Stop()
				r := reply{}
				if err != nil {
					r.Error = err.Error()
				}
				return answer.Encode(r)
			default:
				_ = answer.Encode(reply{Error: fmt.Sprintf("unknown request %q (allowed: %s, %s)", r.Op, opLoginLink, opStop)})
			}
		case <-terminated:
			return srv.Stop()
		}
	}
}
