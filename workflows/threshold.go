package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// Policy thresholds: where a session's context is full enough to rotate,
// what nid learns from vendors that compact by themselves, and when a
// rotation did not help. All of it is pure, so the session, the CLI and the
// dashboard compute the same numbers.

const (
	// learnMargin is how many percent of the window below a vendor's own
	// compaction point nid rotates, once it has seen the vendor compact
	// there: nid's rotation must come first.
	learnMargin = 3
	// effectiveMargin is how far below the threshold, in percent of the
	// window (or of a token threshold without a window), a rotation must
	// leave the context to have helped.
	effectiveMargin = 10
	// breakerRotations and breakerTurns: a session that rotates by itself
	// more than breakerRotations times within breakerTurns turns is
	// thrashing, and its policy rotations stop.
	breakerRotations = 3
	breakerTurns     = 6
)

// Threshold is the context at which a session's policy rotates: the least of
// the policy's percent of the window, its token limit, and a margin below
// where the session's agent kind and model were seen to compact by
// themselves.
type Threshold struct {
	// Tokens is the threshold in tokens; 0 when it cannot be known (no
	// window and no token limit).
	Tokens int64 `json:"tokens,omitempty"`
	// Percent is Tokens as a percent of the window; 0 without a window.
	Percent float64 `json:"percent,omitempty"`
	// By names what set it: "contextPercent", "contextTokens" or
	// "learned".
	By string `json:"by,omitempty"`
}

// LearnedPoint is what a group learned of an agent kind and model that
// compacts by itself, and the threshold its sessions use from then on.
type LearnedPoint struct {
	Kind  string `json:"kind"`
	Model string `json:"model,omitempty"`
	// Percent is the threshold nid uses for them, percent of the window.
	Percent int `json:"percent"`
	// SeenTokens of Window is where the vendor compacted; both are 0 for a
	// point the human set.
	SeenTokens int64 `json:"seenTokens,omitempty"`
	Window     int64 `json:"window,omitempty"`
	// Set says the human set it (nid group set learned=...): what the
	// sessions see later does not change it.
	Set bool `json:"set,omitempty"`
}

// Key is the point's name in nid group set learned=...: kind/model.
func (l LearnedPoint) Key() string { return l.Kind + "/" + l.Model }

// learnedFor is the point for kind and model, if any.
func learnedFor(points []LearnedPoint, kind, model string) *LearnedPoint {
	for i := range points {
		if points[i].Kind == kind && points[i].Model == model {
			return &points[i]
		}
	}
	return nil
}

// EffectiveThreshold is where a session with policy p rotates, its window
// being window tokens (0: unknown) and learned the point its kind and model
// were seen to compact at, if any.
func EffectiveThreshold(p config.Rotate, learned *LearnedPoint, window int64) Threshold {
	var t Threshold
	consider := func(tokens int64, by string) {
		if tokens > 0 && (t.Tokens == 0 || tokens < t.Tokens) {
			t.Tokens, t.By = tokens, by
		}
	}
	if window > 0 {
		consider(percentOf(window, float64(p.ContextPercent)), "contextPercent")
		if learned != nil && learned.Percent > 0 {
			consider(percentOf(window, float64(learned.Percent)), "learned")
		}
	}
	consider(p.ContextTokens, "contextTokens")
	if window > 0 && t.Tokens > 0 {
		t.Percent = float64(t.Tokens) * 100 / float64(window)
	}
	return t
}

func percentOf(window int64, percent float64) int64 {
	return int64(math.Ceil(float64(window) * percent / 100))
}

// margin is how far below t a rotation must leave the context.
func (t Threshold) margin(window int64) int64 {
	if window > 0 {
		return percentOf(window, effectiveMargin)
	}
	return t.Tokens * effectiveMargin / 100
}

// helped says a context of used tokens after a rotation is well below t:
// else the rotation was ineffective, and the next would only repeat it.
func (t Threshold) helped(used, window int64) bool {
	return t.Tokens == 0 || used <= t.Tokens-t.margin(window)
}

// Text is the threshold in both units, "80% = 160k of 200k", as the CLI,
// the dashboard and the agent's context_status say it.
func (t Threshold) Text(window int64) string {
	switch {
	case t.Tokens == 0:
		return "unknown until the agent reports its window"
	case window > 0:
		return fmt.Sprintf("%.0f%% = %s of %s (%s)", math.Floor(t.Percent), TokensText(t.Tokens), TokensText(window), t.By)
	default:
		return fmt.Sprintf("%s tokens (%s)", TokensText(t.Tokens), t.By)
	}
}

// learnFromVendor is the point a vendor compaction before tokens of window
// teaches, when it came before threshold t: nid's own rotation lost the
// race, and rotates a margin before it from then on. ok is false when
// there is nothing to learn.
func learnFromVendor(kind, model string, before, window int64, t Threshold) (LearnedPoint, bool) {
	if window <= 0 || before <= 0 || t.Tokens == 0 || before >= t.Tokens {
		return LearnedPoint{}, false
	}
	seen := int(float64(before) * 100 / float64(window))
	percent := seen - learnMargin
	if percent < 1 {
		return LearnedPoint{}, false
	}
	return LearnedPoint{Kind: kind, Model: model, Percent: percent, SeenTokens: before, Window: window}, true
}

// LearnedText says what nid learned, in the words the feed and the inbox
// use: "Claude Code compacted itself at 83% of 200k; nid now rotates
// claude-sonnet-4-5 sessions at 80%".
func LearnedText(l LearnedPoint) string {
	who := l.Model
	if who == "" {
		who = l.Kind
	}
	return fmt.Sprintf("%s compacted itself at %d%% of %s; nid now rotates %s sessions at %d%%",
		kindTitle(l.Kind), int(float64(l.SeenTokens)*100/float64(max(l.Window, 1))), TokensText(l.Window), who, l.Percent)
}

// kindTitle is how people name an agent kind.
func kindTitle(kind string) string { return agents.KindOf(kind).Title }

// LearnedListText lists learned points as nid group show and group set
// print them: "claude/claude-sonnet-4-5 at 80% (it compacted itself at 83%
// of 200k), codex/gpt-5.5 at 75% (set)"; "none" for none.
func LearnedListText(points []LearnedPoint) string {
	if len(points) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(points))
	for _, p := range points {
		why := "set"
		if !p.Set {
			why = fmt.Sprintf("it compacted itself at %d%% of %s", int(float64(p.SeenTokens)*100/float64(max(p.Window, 1))), TokensText(p.Window))
		}
		parts = append(parts, fmt.Sprintf("%s at %d%% (%s)", p.Key(), p.Percent, why))
	}
	return strings.Join(parts, ", ")
}

// learnedExample is what nid group set learned=... looks like.
const learnedExample = `{"claude/claude-sonnet-4-5": 75}`

// ApplyLearnedJSON lays js, an object from "kind/model" to the percent to
// rotate at (null forgets the point), over points, as typed after
// learned= in nid group set: what the human sets is kept as set.
func ApplyLearnedJSON(points []LearnedPoint, js string) ([]LearnedPoint, error) {
	var set map[string]*int
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&set); err != nil || dec.More() {
		return points, fmt.Errorf("learned: %q is not a JSON object of kind/model to a percent or null, such as %s", js, learnedExample)
	}
	out := slices.Clone(points)
	var problems []string
	for _, key := range slices.Sorted(maps.Keys(set)) {
		kind, model, ok := strings.Cut(key, "/")
		pct := set[key]
		switch {
		case !ok || kind == "":
			problems = append(problems, fmt.Sprintf("%q is not kind/model, e.g. claude/claude-sonnet-4-5", key))
			continue
		case pct == nil || *pct == 0:
			out = slices.DeleteFunc(out, func(l LearnedPoint) bool { return l.Kind == kind && l.Model == model })
			continue
		case *pct < 1 || *pct > 100:
			problems = append(problems, fmt.Sprintf("%s: %d is outside 1..100 (null forgets it)", key, *pct))
			continue
		}
		p := LearnedPoint{Kind: kind, Model: model, Percent: *pct, Set: true}
		if have := learnedFor(out, kind, model); have != nil {
			*have = p
		} else {
			out = append(out, p)
		}
	}
	if len(problems) > 0 {
		return points, fmt.Errorf("learned: %s", strings.Join(problems, "; "))
	}
	slices.SortFunc(out, func(a, b LearnedPoint) int { return strings.Compare(a.Key(), b.Key()) })
	return out, nil
}
