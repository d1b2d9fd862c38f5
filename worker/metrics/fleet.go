package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/nidclient"
)

// scrapeTimeout bounds what one scrape asks of Temporal, well inside
// Prometheus's default scrape timeout of 10 seconds.
const scrapeTimeout = 8 * time.Second

var sessionLabels = []string{labelGroup, labelSession, labelAgent}

var (
	descPercent = prometheus.NewDesc("nid_session_context_percent",
		"How full the session's context window is, in percent; absent while the agent reports no numbers.", sessionLabels, nil)
	descUsed = prometheus.NewDesc("nid_session_context_tokens",
		"Tokens in the session's context, as its agent last reported them; absent while it reports none.", sessionLabels, nil)
	descWindow = prometheus.NewDesc("nid_session_context_window_tokens",
		"The session's context window in tokens; absent while it is unknown.", sessionLabels, nil)
	descTurns = prometheus.NewDesc("nid_session_turns_total",
		"Turns the session has taken, over all its conversations.", sessionLabels, nil)
	descSinceRotation = prometheus.NewDesc("nid_session_turns_since_rotation",
		"Turns the session has taken since its last rotation.", sessionLabels, nil)
	descSessionRotations = prometheus.NewDesc("nid_session_rotations_total",
		"Rotations the session has had, the vendor's own compactions included.", sessionLabels, nil)
	descStatus = prometheus.NewDesc("nid_session_status",
		"1 for the session's status (idle, working, rotating, rate-limited, paused, needs-attention, stopped, ...).",
		append(append([]string(nil), sessionLabels...), labelStatus), nil)
	descSpentTurns = prometheus.NewDesc("nid_group_budget_spent_turns",
		"Turns the group has spent, rotations included.", []string{labelGroup}, nil)
	descSpentTokens = prometheus.NewDesc("nid_group_budget_spent_tokens",
		"Tokens the group has spent.", []string{labelGroup}, nil)
	descSpentUSD = prometheus.NewDesc("nid_group_budget_spent_usd",
		"US dollars the group has spent, where its agents report cost.", []string{labelGroup}, nil)
	descLimitTurns = prometheus.NewDesc("nid_group_budget_limit_turns",
		"The group's turns budget; absent when it has no such limit.", []string{labelGroup}, nil)
	descLimitTokens = prometheus.NewDesc("nid_group_budget_limit_tokens",
		"The group's tokens budget; absent when it has no such limit.", []string{labelGroup}, nil)
	descLimitUSD = prometheus.NewDesc("nid_group_budget_limit_usd",
		"The group's US dollar budget; absent when it has no such limit.", []string{labelGroup}, nil)
)

// fleet reads every session's record and every group's budget from
// Temporal when it is collected: durable numbers, the same whichever
// worker is scraped, so a restarted worker shows them at once.
type fleet struct{ c client.Client }

// Describe sends every metric fleet may collect.
func (f *fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPercent, descUsed, descWindow, descTurns, descSinceRotation, descSessionRotations, descStatus,
		descSpentTurns, descSpentTokens, descSpentUSD, descLimitTurns, descLimitTokens, descLimitUSD} {
		ch <- d
	}
}

// Collect lists the sessions once and queries each group.
func (f *fleet) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	sessions, err := nidclient.ListSessions(ctx, f.c, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descTurns, err)
	}
	for _, s := range sessions {
		labels := []string{s.Group, s.Name, s.Agent}
		c := s.Context
		if c.Percent != nil {
			ch <- prometheus.MustNewConstMetric(descPercent, prometheus.GaugeValue, *c.Percent, labels...)
		}
		if c.Source != "" && c.Source != agents.SourceUnknown {
			ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, float64(c.UsedTokens), labels...)
		}
		if c.WindowTokens > 0 {
			ch <- prometheus.MustNewConstMetric(descWindow, prometheus.GaugeValue, float64(c.WindowTokens), labels...)
		}
		ch <- prometheus.MustNewConstMetric(descTurns, prometheus.CounterValue, float64(c.TotalTurns), labels...)
		ch <- prometheus.MustNewConstMetric(descSinceRotation, prometheus.GaugeValue, float64(c.Turns), labels...)
		ch <- prometheus.MustNewConstMetric(descSessionRotations, prometheus.CounterValue, float64(c.Rotations), labels...)
		if s.Status != "" {
			ch <- prometheus.MustNewConstMetric(descStatus, prometheus.GaugeValue, 1, append(labels, s.Status)...)
		}
	}
	groups, err := nidclient.ListGroups(ctx, f.c)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descSpentTurns, err)
	}
	for _, g := range groups {
		view, err := nidclient.QueryGroup(ctx, f.c, g)
		if err != nil {
			// A group that just ended, or one whose worker is busy: its
			// budget is left out of this scrape, and the next one asks
			// again.
			ch <- prometheus.NewInvalidMetric(descSpentTurns, err)
			continue
		}
		spent, limit := view.Board.Spent, view.Board.Budget
		ch <- prometheus.MustNewConstMetric(descSpentTurns, prometheus.GaugeValue, float64(spent.Turns), g)
		ch <- prometheus.MustNewConstMetric(descSpentTokens, prometheus.GaugeValue, float64(spent.Tokens), g)
		ch <- prometheus.MustNewConstMetric(descSpentUSD, prometheus.GaugeValue, spent.USD, g)
		if limit.Turns > 0 {
			ch <- prometheus.MustNewConstMetric(descLimitTurns, prometheus.GaugeValue, float64(limit.Turns), g)
		}
		if limit.Tokens > 0 {
			ch <- prometheus.MustNewConstMetric(descLimitTokens, prometheus.GaugeValue, float64(limit.Tokens), g)
		}
		if limit.USD > 0 {
			ch <- prometheus.MustNewConstMetric(descLimitUSD, prometheus.GaugeValue, limit.USD, g)
		}
	}
}
