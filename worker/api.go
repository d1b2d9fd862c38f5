package worker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

// MaxRequestBytes bounds an API request body.
const MaxRequestBytes = 64 << 10

// API method names, as in POST /api/<method>.
const (
	MethodSessionList       = "session.list"
	MethodSessionGet        = "session.get"
	MethodSessionRotate     = "session.rotate"
	MethodSessionSend       = "session.send"
	MethodSessionTranscript = "session.transcript"
	MethodSessionStop       = "session.stop"
	MethodSessionStart      = "session.start"
	MethodSessionRotations  = "session.rotations"
	MethodGroupList         = "group.list"
	MethodGroupGet          = "group.get"
	MethodGroupSet          = "group.set"
	MethodBoardRead         = "board.read"
	MethodInboxList         = "inbox.list"
	MethodInboxClear        = "inbox.clear"
	MethodHostList          = "host.list"
	MethodSessionMove       = "session.move"
)

// Error codes of the API's JSON errors.
const (
	CodeBadJSON          = "bad_json"
	CodeInvalid          = "invalid"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeUnknownMethod    = "unknown_method"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "too_large"
	CodeNotSupported     = "not_supported"
	CodeConflict         = "conflict"
	CodeUnavailable      = "unavailable"
)

// APIError is the body of every failed API request. Field names the request
// field at fault, when one is.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *APIError) Error() string { return e.Message }

func invalid(field, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// APIOptions configures the API.
type APIOptions struct {
	// Token is the bearer token every request needs (see APIToken).
	Token string
	// Transcripts are this host's session transcripts.
	Transcripts *transcript.Log
	// WebUI is the Temporal Web UI's address, for links to workflows; empty
	// when there is none.
	WebUI     string
	Namespace string
	// Temporal is the Temporal server's address, as this worker dials it.
	Temporal string
	// MaxEventStreams is how many event streams may be open at once
	// (zero: DefaultMaxEventStreams). Each one polls Temporal.
	MaxEventStreams int
	// Now is the clock login links expire by; nil is time.Now.
	Now func() time.Time
}

// DefaultMaxEventStreams bounds the open event streams: a dashboard tab
// holds one.
const DefaultMaxEventStreams = 32

// API serves nid's JSON API, its event stream and the dashboard from one
// handler. Every request needs the bearer token, or the cookie the
// dashboard sets when a browser logs in (see LoginLink).
type API struct {
	c    client.Client
	opts APIOptions
	// listing answers session.list and the event streams' session lists.
	listing *nidclient.Listing
	guard   *guard
	methods map[string]method
	// streams holds a token for each open event stream.
	streams chan struct{}
}

// NewAPI returns the API over Temporal client c.
func NewAPI(c client.Client, opts APIOptions) *API {
	a := &API{c: c, opts: opts, listing: nidclient.NewListing(c), guard: newGuard(opts.Token, opts.Now), streams: make(chan struct{}, cmp.Or(opts.MaxEventStreams, DefaultMaxEventStreams))}
	a.methods = map[string]method{
		MethodSessionList:       onGroup(optional, a.sessionList),
		MethodSessionGet:        onSession(a.sessionGet),
		MethodSessionRotate:     onSession(a.sessionRotate),
		MethodSessionSend:       onSession(a.sessionSend),
		MethodSessionTranscript: onSession(a.sessionTranscript),
		MethodSessionStop:       onSession(a.sessionStop),
		MethodSessionStart:      onSession(a.sessionStart),
		MethodSessionRotations:  a.sessionRotations,
		MethodGroupList:         a.groupList,
		MethodGroupGet:          onGroup(required, a.groupGet),
		MethodGroupSet:          onGroup(required, a.groupSet),
		MethodBoardRead:         onGroup(required, a.boardRead),
		MethodInboxList:         onGroup(optional, a.inboxList),
		MethodInboxClear:        onGroup(optional, a.inboxClear),
		MethodHostList:          a.hostList,
		MethodSessionMove:       onSession(a.sessionMove),
	}
	return a
}

// Handler serves /api/<method>, /api/events and the dashboard; mount it at
// "/".
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/events", a.serveEvents)
	mux.HandleFunc("/api/", a.serveMethod)
	mux.HandleFunc("/login", a.serveLogin)
	mux.HandleFunc("/login/", a.serveLoginLink)
	mux.HandleFunc("/logout", a.serveLogout)
	mux.Handle("/", a.dashboard())
	return mux
}

func (a *API) serveMethod(w http.ResponseWriter, r *http.Request) {
	if !a.guard.api(r) {
		writeError(w, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "missing or wrong token: send Authorization: Bearer <token> (http.token, NID_HTTP_TOKEN, or the file nid up names)"})
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/api/")
	method, ok := a.methods[name]
	if !ok {
		writeError(w, &APIError{Status: http.StatusNotFound, Code: CodeUnknownMethod,
			Message: fmt.Sprintf("no API method %q (methods: %s, and GET /api/events)", name, strings.Join(slicesSorted(a.methods), ", "))})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: name + " takes POST with a JSON body"})
		return
	}
	res, err := method(r.Context(), r)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// nonNil makes an empty list answer [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func slicesSorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// asAPIError maps an operation's error to the API's: the nidclient types
// to their status and code, anything else to unavailable.
func asAPIError(err error) *APIError {
	var (
		ae       *APIError
		notFound *nidclient.NotFoundError
		refused  *nidclient.RefusedError
		bad      *nidclient.InvalidError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &notFound):
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Field: notFound.Kind, Message: notFound.Message}
	case errors.As(err, &refused):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: refused.Message}
	case errors.As(err, &bad) && bad.Shape:
		return &APIError{Status: http.StatusBadRequest, Code: CodeBadJSON, Field: bad.Field, Message: bad.Message}
	case errors.As(err, &bad):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Field: bad.Field, Message: bad.Message}
	}
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *APIError) {
	if e.Status == 0 {
		e.Status = http.StatusBadRequest
	}
	writeJSON(w, e.Status, e)
}

// decode reads the request body into v: at most MaxRequestBytes, a single
// JSON object, no fields v does not have. An empty body is an empty object.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: fmt.Sprintf("request body over %d bytes", MaxRequestBytes)}
	}
	if err != nil {
		return &APIError{Code: CodeBadJSON, Message: "reading the request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badJSON(err)
	}
	if dec.More() {
		return &APIError{Code: CodeBadJSON, Message: "the body must be one JSON object"}
	}
	return nil
}

// badJSON names the field a decoding error is about, when there is one.
func badJSON(err error) *APIError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &APIError{Code: CodeBadJSON, Field: te.Field, Message: fmt.Sprintf("%s: must be a %s, not a %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)}
	}
	if errors.As(err, &te) {
		return &APIError{Code: CodeBadJSON, Message: fmt.Sprintf("the body must be one JSON object, not a %s", strings.NewReplacer("array", "list", "bool", "boolean").Replace(te.Value))}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return &APIError{Code: CodeBadJSON, Field: f, Message: fmt.Sprintf("%s: unknown field", f)}
	}
	return &APIError{Code: CodeBadJSON, Message: "the body is not a JSON object: " + strings.TrimPrefix(msg, "json: ")}
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "list"
	default:
		return "number"
	}
}

// sessionRef checks the session field: "group/session".
func sessionRef(ref string) (group, name string, err error) {
	if ref == "" {
		return "", "", invalid("session", "missing: name the session as GROUP/SESSION, e.g. web/lead")
	}
	group, name, perr := workflows.ParseSessionRef(ref)
	if perr != nil {
		return "", "", invalid("session", "%q is not GROUP/SESSION, e.g. web/lead", ref)
	}
	return group, name, nil
}

func groupName(field, g string, required bool) error {
	switch {
	case g == "" && required:
		return invalid(field, "missing: name a group, e.g. web")
	case g != "" && !workflows.ValidName(g):
		return invalid(field, "%q is not a group name: use lower-case letters, digits, - and _", g)
	}
	return nil
}

// method answers one API method's request.
type method func(context.Context, *http.Request) (any, error)

// sessionRequest is a request about one session alone. Every request about
// one session has a session field, which its sessionField method returns.
// (Embedding this struct instead would name it in decoding errors.)
type sessionRequest struct {
	Session string `json:"session"`
}

func (r *sessionRequest) sessionField() string { return r.Session }

// onSession makes an API method of do, which answers a request about one
// session: the body decoded into R, its session field checked, do gets the
// session's group and name.
func onSession[R any, P interface {
	*R
	sessionField() string
}](do func(ctx context.Context, group, name string, req R) (any, error)) method {
	return func(ctx context.Context, r *http.Request) (any, error) {
		var req R
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		group, name, err := sessionRef(P(&req).sessionField())
		if err != nil {
			return nil, err
		}
		return do(ctx, group, name, req)
	}
}

// groupRequest is a request about a group alone; every request about a
// group has a group field, which its groupField method returns.
type groupRequest struct {
	Group string `json:"group"`
}

func (r *groupRequest) groupField() string { return r.Group }

// Whether a method's group field may be left out (every group).
const (
	required = true
	optional = false
)

// onGroup is onSession for a request about a group, whose group field may
// be left out unless need is required.
func onGroup[R any, P interface {
	*R
	groupField() string
}](need bool, do func(ctx context.Context, group string, req R) (any, error)) method {
	return func(ctx context.Context, r *http.Request) (any, error) {
		var req R
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		group := P(&req).groupField()
		if err := groupName("group", group, need); err != nil {
			return nil, err
		}
		return do(ctx, group, req)
	}
}
