package agents

import "context"

// Logger is where an adapter writes what is worth a line in the worker's
// log but fails nothing. Temporal's activity logger is one; the agents
// package itself does not depend on Temporal.
type Logger interface {
	Warn(msg string, keyvals ...any)
}

type loggerKey struct{}

// WithLogger returns ctx carrying l, for the adapters that run under it.
func WithLogger(ctx context.Context, l Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// loggerFor is the logger ctx carries, or one that discards (in tests, or
// a caller that gave none).
func loggerFor(ctx context.Context) Logger {
	if l, ok := ctx.Value(loggerKey{}).(Logger); ok {
		return l
	}
	return discard{}
}

type discard struct{}

func (discard) Warn(string, ...any) {}
