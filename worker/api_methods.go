package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

// SessionList is the session.list answer.
type SessionList struct {
	Sessions []nidclient.Session `json:"sessions"`
	// Namespace is the Temporal namespace the sessions run in, so that a
	// client can tell that this worker serves the one it would ask.
	Namespace string `json:"namespace,omitempty"`
	// Temporal is the address of the Temporal server the sessions run on.
	Temporal string `json:"temporal,omitempty"`
	// Unserved is there when no worker has asked Temporal for the
	// sessions' work lately (see nidclient.Unserved): then each status
	// is what the session last wrote.
	Unserved *Unserved `json:"unserved,omitempty"`
}

// Unserved says since when no worker has asked for nid's work.
type Unserved struct {
	// LastPoll is the last worker's last poll, absent when Temporal knows
	// of none.
	LastPoll time.Time `json:"lastPoll,omitzero"`
}

func (a *API) sessionList(ctx context.Context, group string, _ groupRequest) (any, error) {
	// Asked beside the list, so that it costs no time of its own.
	unserved := make(chan *Unserved, 1)
	go func() { unserved <- a.unserved(ctx) }()
	sessions, err := a.listing.Sessions(ctx, group)
	if err != nil {
		return nil, err
	}
	return SessionList{Sessions: nonNil(sessions), Namespace: a.opts.Namespace, Temporal: a.opts.Temporal, Unserved: <-unserved}, nil
}

// unserved is nil unless no worker has asked for nid's work lately, and
// when Temporal will not say.
func (a *API) unserved(ctx context.Context) *Unserved {
	unserved, since, err := nidclient.Unserved(ctx, a.c, time.Now())
	if err != nil || !unserved {
		return nil
	}
	return &Unserved{LastPoll: since}
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
	// Message says when the message runs, as nid send says it: after a
	// hand-back while a person holds the session with nid attach.
	Message string `json:"message"`
}

func (a *API) sessionSend(ctx context.Context, group, name string, req sendRequest) (any, error) {
	said, err := nidclient.Send(ctx, a.c, group, name, req.Text)
	if err != nil {
		return nil, err
	}
	return SendAnswer{Session: group + "/" + name, Queued: true, Message: said}, nil
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
