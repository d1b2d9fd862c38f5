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
	"net/url"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
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
	c       client.Client
	opts    APIOptions
	guard   *guard
	methods map[string]method
	// streams holds a token for each open event stream.
	streams chan struct{}
}

// NewAPI returns the API over Temporal client c.
func NewAPI(c client.Client, opts APIOptions) *API {
	a := &API{c: c, opts: opts, guard: newGuard(opts.Token, opts.Now), streams: make(chan struct{}, cmp.Or(opts.MaxEventStreams, DefaultMaxEventStreams))}
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

// SessionList is the session.list answer.
type SessionList struct {
	Sessions []nidclient.Session `json:"sessions"`
}

func (a *API) sessionList(ctx context.Context, group string, _ groupRequest) (any, error) {
	sessions, err := nidclient.Sessions(ctx, a.c, group)
	if err != nil {
		return nil, err
	}
	return SessionList{Sessions: nonNil(sessions)}, nil
}

// SessionAnswer is the session.get answer: the session's view with where to
// find its workflow.
type SessionAnswer struct {
	workflows.SessionView
	WorkflowID string `json:"workflowID"`
	// WorkflowURL is the session's workflow in the Temporal Web UI.
	WorkflowURL string `json:"workflowURL,omitempty"`
}

func (a *API) sessionGet(ctx context.Context, group, name string, _ sessionRequest) (any, error) {
	v, err := nidclient.GetSession(ctx, a.c, group, name)
	if err != nil {
		return nil, err
	}
	id := workflows.SessionID(group, name)
	return SessionAnswer{SessionView: v, WorkflowID: id, WorkflowURL: a.workflowURL(id)}, nil
}

func (a *API) workflowURL(id string) string {
	if a.opts.WebUI == "" {
		return ""
	}
	return strings.TrimRight(a.opts.WebUI, "/") + "/namespaces/" + url.PathEscape(a.opts.Namespace) + "/workflows/" + url.PathEscape(id)
}

type rotateRequest struct {
	Session string `json:"session"`
	Mode    string `json:"mode"`
}

func (r *rotateRequest) sessionField() string { return r.Session }

// RotateAnswer is the session.rotate answer: when the rotation runs (now,
// after-turn, or joined to one running), by which method, and the sentence
// `nid rotate` prints.
type RotateAnswer struct {
	Session string `json:"session"`
	workflows.RotateAnswer
}

func (a *API) sessionRotate(ctx context.Context, group, name string, req rotateRequest) (any, error) {
	answer, err := nidclient.Rotate(ctx, a.c, group, name, req.Mode)
	if err != nil {
		return nil, err
	}
	return RotateAnswer{Session: group + "/" + name, RotateAnswer: answer}, nil
}

type sendRequest struct {
	Session string `json:"session"`
	Text    string `json:"text"`
}

func (r *sendRequest) sessionField() string { return r.Session }

// SendAnswer is the session.send answer.
type SendAnswer struct {
	Session string `json:"session"`
	Queued  bool   `json:"queued"`
}

func (a *API) sessionSend(ctx context.Context, group, name string, req sendRequest) (any, error) {
	if err := nidclient.Send(ctx, a.c, group, name, req.Text); err != nil {
		return nil, err
	}
	return SendAnswer{Session: group + "/" + name, Queued: true}, nil
}

type transcriptRequest struct {
	Session string `json:"session"`
	// After returns only entries after this sequence number.
	After int64 `json:"after"`
	// Limit keeps the last entries only; 0 means 200.
	Limit int `json:"limit"`
}

func (r *transcriptRequest) sessionField() string { return r.Session }

// TranscriptAnswer is the session.transcript answer.
type TranscriptAnswer struct {
	Session string             `json:"session"`
	Entries []transcript.Entry `json:"entries"`
}

// defaultTranscriptLimit is how many entries session.transcript returns
// when the request does not say.
const defaultTranscriptLimit = 200

func (a *API) sessionTranscript(ctx context.Context, group, name string, req transcriptRequest) (any, error) {
	if req.Limit < 0 {
		return nil, invalid("limit", "must not be negative")
	}
	if req.After < 0 {
		return nil, invalid("after", "must not be negative")
	}
	if a.opts.Transcripts == nil {
		return nil, &APIError{Status: http.StatusNotImplemented, Code: CodeNotSupported, Message: "this server keeps no transcripts"}
	}
	entries, err := a.opts.Transcripts.Read(group, name, req.After)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 && req.After == 0 {
		// No transcript on this host: say whether the session exists at
		// all rather than answer an empty list for a typo.
		if _, err := nidclient.GetSession(ctx, a.c, group, name); err != nil {
			return nil, err
		}
	}
	limit := cmp.Or(req.Limit, defaultTranscriptLimit)
	if len(entries) > limit {
		entries = entries[len(entries)-limit:]
	}
	return TranscriptAnswer{Session: group + "/" + name, Entries: nonNil(entries)}, nil
}

// GroupList is the group.list answer.
type GroupList struct {
	Groups []string `json:"groups"`
}

func (a *API) groupList(ctx context.Context, r *http.Request) (any, error) {
	var req struct{}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	groups, err := nidclient.ListGroups(ctx, a.c)
	if err != nil {
		return nil, err
	}
	return GroupList{Groups: nonNil(groups)}, nil
}

type moveRequest struct {
	Session string `json:"session"`
	Host    string `json:"host"`
}

func (r *moveRequest) sessionField() string { return r.Session }

// MoveAnswer is the session.move answer: what the move does, as nid move
// says it.
type MoveAnswer struct {
	Session string `json:"session"`
	Host    string `json:"host"`
	Text    string `json:"text"`
}

func (a *API) sessionMove(ctx context.Context, group, name string, req moveRequest) (any, error) {
	text, err := nidclient.Move(ctx, a.c, group, name, req.Host)
	if err != nil {
		return nil, err
	}
	return MoveAnswer{Session: group + "/" + name, Host: req.Host, Text: text}, nil
}

// HostList is the host.list answer.
type HostList struct {
	Hosts []workflows.HostView `json:"hosts"`
}

func (a *API) hostList(ctx context.Context, r *http.Request) (any, error) {
	var req struct{}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	v, err := nidclient.Hosts(ctx, a.c)
	if err != nil {
		return nil, err
	}
	return HostList{Hosts: v.Hosts}, nil
}

// GroupAnswer is the group.get answer: the group's view, with its policy
// and learned thresholds in the words nid prints them everywhere, so the
// dashboard does not word them again.
type GroupAnswer struct {
	workflows.GroupView
	PolicyText  string `json:"policyText"`
	LearnedText string `json:"learnedText"`
}

func (a *API) groupGet(ctx context.Context, group string, _ groupRequest) (any, error) {
	v, err := nidclient.GetGroup(ctx, a.c, group)
	if err != nil {
		return nil, err
	}
	return GroupAnswer{GroupView: v, PolicyText: workflows.PolicyText(v.Policy), LearnedText: workflows.LearnedListText(v.Learned)}, nil
}

type groupSetRequest struct {
	Group   string          `json:"group"`
	Rotate  json.RawMessage `json:"rotate"`
	Budget  json.RawMessage `json:"budget"`
	Learned json.RawMessage `json:"learned"`
}

func (r *groupSetRequest) groupField() string { return r.Group }

// GroupSetAnswer is the group.set answer: the group's policy and budget
// after the change.
type GroupSetAnswer struct {
	Group   string                   `json:"group"`
	Rotate  config.Rotate            `json:"rotate"`
	Budget  config.Budget            `json:"budget"`
	Learned []workflows.LearnedPoint `json:"learned"`
}

// groupSet hands each setting to nidclient.SetGroup as it came, which
// validates it as `nid group set` does.
func (a *API) groupSet(ctx context.Context, group string, req groupSetRequest) (any, error) {
	res, err := nidclient.SetGroup(ctx, a.c, group, nidclient.GroupSettings{RotateJSON: string(req.Rotate), BudgetJSON: string(req.Budget), LearnedJSON: string(req.Learned)})
	if err != nil {
		return nil, err
	}
	return GroupSetAnswer{Group: group, Rotate: res.Rotate, Budget: res.Budget, Learned: nonNil(res.Learned)}, nil
}

// BoardAnswer is the board.read answer: the board, and its text as agents'
// board_read shows it.
type BoardAnswer struct {
	Group string              `json:"group"`
	Board workflows.BoardView `json:"board"`
	Text  string              `json:"text"`
}

func (a *API) boardRead(ctx context.Context, group string, _ groupRequest) (any, error) {
	v, err := nidclient.GetGroup(ctx, a.c, group)
	if err != nil {
		return nil, err
	}
	return BoardAnswer{Group: group, Board: v.Board, Text: workflows.BoardText(v.Board, "")}, nil
}

// InboxAnswer is the inbox.list answer, oldest first.
type InboxAnswer struct {
	Items []workflows.InboxItem `json:"items"`
}

func (a *API) inboxList(ctx context.Context, group string, _ groupRequest) (any, error) {
	items, err := nidclient.Inbox(ctx, a.c, group)
	if err != nil {
		return nil, err
	}
	return InboxAnswer{Items: items}, nil
}

// InboxCleared is the inbox.clear answer: how many items were removed.
type InboxCleared struct {
	Cleared int `json:"cleared"`
}

func (a *API) inboxClear(ctx context.Context, group string, _ groupRequest) (any, error) {
	n, err := nidclient.ClearInbox(ctx, a.c, group)
	if err != nil {
		return nil, err
	}
	return InboxCleared{Cleared: n}, nil
}

// StopAnswer is the session.stop answer: what the session let go of, and
// the status it was in (a busy one stops its agent when its step ends).
type StopAnswer struct {
	Session  string   `json:"session"`
	Released []string `json:"released"`
	Was      string   `json:"was"`
}

func (a *API) sessionStop(ctx context.Context, group, name string, req sessionRequest) (any, error) {
	res, err := nidclient.Stop(ctx, a.c, group, name)
	if err != nil {
		return nil, err
	}
	return StopAnswer{Session: req.Session, Released: nonNil(res.Released), Was: res.Was}, nil
}

type startRequest struct {
	Session string `json:"session"`
	Fresh   bool   `json:"fresh"`
}

func (r *startRequest) sessionField() string { return r.Session }

// StartAnswer is the session.start answer.
type StartAnswer struct {
	Session string `json:"session"`
	Fresh   bool   `json:"fresh"`
}

func (a *API) sessionStart(ctx context.Context, group, name string, req startRequest) (any, error) {
	if err := nidclient.Start(ctx, a.c, group, name, req.Fresh); err != nil {
		return nil, err
	}
	return StartAnswer{Session: req.Session, Fresh: req.Fresh}, nil
}

type rotationsRequest struct {
	Session string `json:"session"`
	Group   string `json:"group"`
}

// RotationsAnswer is the session.rotations answer: each session's
// receipts, oldest first, and what they add up to.
type RotationsAnswer struct {
	Sessions []nidclient.SessionRotations `json:"sessions"`
}

func (a *API) sessionRotations(ctx context.Context, r *http.Request) (any, error) {
	var req rotationsRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	var group, name string
	switch {
	case req.Session != "" && req.Group != "":
		return nil, invalid("group", "give session (GROUP/SESSION) or group, not both")
	case req.Session != "":
		var err error
		if group, name, err = sessionRef(req.Session); err != nil {
			return nil, err
		}
	case req.Group == "":
		return nil, invalid("session", "missing: name a session as GROUP/SESSION, e.g. web/lead, or a group as group, e.g. web")
	default:
		if err := groupName("group", req.Group, true); err != nil {
			return nil, err
		}
		group = req.Group
	}
	sessions, err := nidclient.Rotations(ctx, a.c, group, name)
	if err != nil {
		return nil, err
	}
	return RotationsAnswer{Sessions: sessions}, nil
}
