package workflows

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fill sets every field v reaches to a value that is not its zero, so
// that no omitempty hides a key.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// keysOf is the JSON keys of a fully populated T, nested ones as
// "outer.inner".
func keysOf[T any](t *testing.T) []string {
	var x T
	fill(reflect.ValueOf(&x).Elem())
	b, err := json.Marshal(x)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			keys = append(keys, prefix+k)
			if inner, ok := v.(map[string]any); ok && k != "grants" {
				walk(prefix+k+".", inner)
			}
		}
	}
	walk("", m)
	sort.Strings(keys)
	return keys
}

// A session's state and view keep the JSON keys they had before the state
// was made of parts: recorded histories carry the state across
// continue-as-new, and nid show --json, the API and the memo show the
// view and the context record.
func TestSessionJSONKeysStay(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []string
		want string
	}{
		{"SessionState", keysOf[SessionState](t), sessionStateKeys},
		{"SessionView", keysOf[SessionView](t), sessionViewKeys},
		{"ContextRecord", keysOf[ContextRecord](t), contextRecordKeys},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := json.Marshal(tt.got)
			require.JSONEq(t, tt.want, string(got))
		})
	}
}

// The keys as they were when the state was one flat struct, and the
// hold's added since (VersionAttach: attach, lastHandback, lastLease), and
// the board's count of tasks a session's copy leaves out
// (VersionTargetedBoard: board.others; VersionLeanBoard: board.open).
const (
	sessionStateKeys  = `["attach","attach.before","attach.before.lastRotation","attach.before.lastRotation.at","attach.before.lastRotation.method","attach.before.lastRotation.ok","attach.before.lastRotation.reason","attach.before.model","attach.before.percent","attach.before.rotations","attach.before.source","attach.before.threshold","attach.before.threshold.by","attach.before.threshold.percent","attach.before.threshold.tokens","attach.before.totalTurns","attach.before.turns","attach.before.usedTokens","attach.before.windowTokens","attach.expired","attach.host","attach.lease","attach.ready","attach.readyAt","attach.renewedAt","attach.since","attach.waitingForTurn","attach.who","board","board.budget","board.budget.tokens","board.budget.turns","board.budget.usd","board.exhausted","board.goal","board.grants","board.group","board.locks","board.open","board.others","board.prompts","board.prompts.continue","board.prompts.goal","board.prompts.goalContinue","board.prompts.task","board.rev","board.slots","board.spent","board.spent.tokens","board.spent.turns","board.spent.usd","board.tasks","branch","briefed","briefedTask","claimAsked","context","context.lastRotation","context.lastRotation.at","context.lastRotation.method","context.lastRotation.ok","context.lastRotation.reason","context.model","context.percent","context.rotations","context.source","context.threshold","context.threshold.by","context.threshold.percent","context.threshold.tokens","context.totalTurns","context.turns","context.usedTokens","context.windowTokens","contextFull","conversation","events","generation","handoff","handoffNext","handoffPending","historyLimit","host","hostDown","hostDownSince","hostDownTold","lastHandback","lastHandback.after","lastHandback.after.lastRotation","lastHandback.after.lastRotation.at","lastHandback.after.lastRotation.method","lastHandback.after.lastRotation.ok","lastHandback.after.lastRotation.reason","lastHandback.after.model","lastHandback.after.percent","lastHandback.after.rotations","lastHandback.after.source","lastHandback.after.threshold","lastHandback.after.threshold.by","lastHandback.after.threshold.percent","lastHandback.after.threshold.tokens","lastHandback.after.totalTurns","lastHandback.after.turns","lastHandback.after.usedTokens","lastHandback.after.windowTokens","lastHandback.before","lastHandback.before.lastRotation","lastHandback.before.lastRotation.at","lastHandback.before.lastRotation.method","lastHandback.before.lastRotation.ok","lastHandback.before.lastRotation.reason","lastHandback.before.model","lastHandback.before.percent","lastHandback.before.rotations","lastHandback.before.source","lastHandback.before.threshold","lastHandback.before.threshold.by","lastHandback.before.threshold.percent","lastHandback.before.threshold.tokens","lastHandback.before.totalTurns","lastHandback.before.turns","lastHandback.before.usedTokens","lastHandback.before.windowTokens","lastHandback.compactions","lastHandback.conversation","lastHandback.expired","lastHandback.handTurns","lastHandback.note","lastHandback.since","lastHandback.until","lastHandback.who","lastLease","lastOutput","learned","messages","moves","nextSeq","pendingMove","pendingRotate","pendingRotate.mode","pendingRotate.reason","points","policy","policy.contextPercent","policy.contextTokens","policy.maxConcurrentRotations","policy.maxTurns","policy.mode","policyHalted","policyHeldAtTurn","pushPending","receipts","reserveSeq","rotationAttempts","rotationFailures","salvage","selfRotations","slotAsked","slotSeq","status","stopDone","stopped","turnFailures","unbilled","unbilled.session","unbilled.tokens","unbilled.turns","unbilled.usd","usedSeq","worktree"]`
	sessionViewKeys   = `["agent","attach","attach.host","attach.ready","attach.since","attach.waitingForTurn","attach.who","branch","context","context.lastRotation","context.lastRotation.at","context.lastRotation.method","context.lastRotation.ok","context.lastRotation.reason","context.model","context.percent","context.rotations","context.source","context.threshold","context.threshold.by","context.threshold.percent","context.threshold.tokens","context.totalTurns","context.turns","context.usedTokens","context.windowTokens","contextFull","conversation","events","generation","group","handoffNext","handoffPending","host","hostDown","lastHandback","lastHandback.after","lastHandback.after.lastRotation","lastHandback.after.lastRotation.at","lastHandback.after.lastRotation.method","lastHandback.after.lastRotation.ok","lastHandback.after.lastRotation.reason","lastHandback.after.model","lastHandback.after.percent","lastHandback.after.rotations","lastHandback.after.source","lastHandback.after.threshold","lastHandback.after.threshold.by","lastHandback.after.threshold.percent","lastHandback.after.threshold.tokens","lastHandback.after.totalTurns","lastHandback.after.turns","lastHandback.after.usedTokens","lastHandback.after.windowTokens","lastHandback.before","lastHandback.before.lastRotation","lastHandback.before.lastRotation.at","lastHandback.before.lastRotation.method","lastHandback.before.lastRotation.ok","lastHandback.before.lastRotation.reason","lastHandback.before.model","lastHandback.before.percent","lastHandback.before.rotations","lastHandback.before.source","lastHandback.before.threshold","lastHandback.before.threshold.by","lastHandback.before.threshold.percent","lastHandback.before.threshold.tokens","lastHandback.before.totalTurns","lastHandback.before.turns","lastHandback.before.usedTokens","lastHandback.before.windowTokens","lastHandback.compactions","lastHandback.conversation","lastHandback.expired","lastHandback.handTurns","lastHandback.note","lastHandback.since","lastHandback.until","lastHandback.who","lastOutput","locks","moving","name","pendingRotate","pendingRotate.mode","pendingRotate.reason","points","policy","policy.contextPercent","policy.contextTokens","policy.maxConcurrentRotations","policy.maxTurns","policy.mode","policyHalted","queuedBytes","queuedMessages","receipts","rotating","rotating.mode","rotating.reason","rung","spec","spec.kind","spec.sim","spec.sim.ack","spec.sim.compactAt","spec.sim.compactKeeps","spec.sim.failCompact","spec.sim.handoffAfterTurns","spec.sim.noHandoff","spec.sim.silent","spec.sim.startTokens","spec.sim.taskTurns","spec.sim.tokensPerTurn","spec.sim.turnDelay","spec.sim.window","spec.turnTimeout","status","task","task.claimedAt","task.detail","task.doneAt","task.holder","task.id","task.status","task.title","workdir","worktree"]`
	contextRecordKeys = `["lastRotation","lastRotation.at","lastRotation.method","lastRotation.ok","lastRotation.reason","model","percent","rotations","source","threshold","threshold.by","threshold.percent","threshold.tokens","totalTurns","turns","usedTokens","windowTokens"]`
)
