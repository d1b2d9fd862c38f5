// nid's dashboard: one script, no dependencies. Pages are routed by path;
// data comes from the JSON API (POST /api/<method>) and live updates from
// the server-sent events at /api/events.
"use strict";

const yellowFrom = 75;
const main = document.getElementById("main");

async function api(method, body) {
  const r = await fetch("/api/" + method, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Nid-Dashboard": "1" },
    body: JSON.stringify(body || {}),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(data.message || r.statusText);
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    // Styles go through the CSSOM: the content security policy refuses
    // style attributes.
    else if (k === "style") Object.assign(e.style, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// svg makes an SVG element: the chart is drawn with them, nothing loaded.
const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// tokens is 200k, 1.3k, 1M: as nid ls prints them.
function tokens(n) {
  if (n < 1000) return String(n);
  const tenths = Math.floor((n + 50) / 100);
  if (tenths < 10000) return tenthsText(tenths) + "k";
  return tenthsText(Math.floor((n + 50000) / 100000)) + "M";
}
function tenthsText(t) { return t % 10 === 0 ? String(t / 10) : (t / 10).toFixed(1); }

// ctxText is "ctx 62% of 200k", or "ctx —" when the agent reports nothing;
// as nid ls says it.
function ctxText(c) {
  if (c.percent === undefined || c.percent === null) return "ctx —";
  let s = "ctx " + Math.floor(c.percent) + "%";
  if (c.windowTokens > 0) s += " of " + tokens(c.windowTokens);
  // Not a fuller meter: the agent says it holds more than its window.
  if (c.percent > 100) s += " (more than the window, as the agent reports it)";
  return s;
}
function ctxCell(c) {
  const warn = c.percent !== undefined && c.percent !== null && Math.floor(c.percent) >= yellowFrom;
  return el("span", { class: "ctx" + (warn ? " warn" : "") }, ctxText(c));
}

function time(at) { return new Date(at).toLocaleTimeString([], { hour12: false }); }

function rotationText(r) {
  let s = "↻ " + r.method + " (" + r.reason + (r.fellBack ? ", compact failed" : "") + ")";
  if (r.beforeTokens > 0 || r.afterTokens > 0) s += " " + tokens(r.beforeTokens) + " → " + tokens(r.afterTokens);
  if (r.oldConversation && r.newConversation && r.oldConversation !== r.newConversation) s += "  " + r.oldConversation + " → " + r.newConversation;
  return s;
}
// sourceText says where a handoff came from, as nid rotations does.
const sourceNames = { agent: "the agent's handoff", nid: "handoff built by nid", "last-output": "no handoff, last output" };
function sourceText(r) { return sourceNames[r.summarySource] || r.summarySource; }
// costText, summaryCell and factsText show a rotation's receipt.
function costText(r) {
  if (!r.costTokens && !r.costUSD) return "—";
  return tokens(r.costTokens) + " tokens" + (r.costUSD ? " $" + r.costUSD.toFixed(2) : "");
}
function summaryCell(r) {
  if (!r.summarySource) return r.summary || "";
  return el("span", {}, el("span", { class: "source source-" + r.summarySource }, sourceText(r) + ", " + tokens(r.summaryBytes || 0) + "B"),
    " " + clip(r.summary || "", 160));
}
function factsText(r) {
  const f = r.facts;
  if (!f) return "—";
  if (!f.repo) return "no repo";
  return (f.branch ? f.branch + " " : "") + (f.head ? "at " + f.head.split(" ")[0] + ", " : "") +
    f.commits + (f.commits === 1 ? " commit, " : " commits, ") + f.changed + " changed";
}
// verifiedText is a receipt's verified word as nid rotations prints it.
function verifiedText(v) {
  return v === "not-asked" ? "not asked" : v;
}
function eventText(e) {
  if (e.kind === "rotation" && e.rotation) {
    const r = e.rotation;
    let s = rotationText(r);
    if (r.summary) s += "  " + (r.summarySource && r.summarySource !== "agent" ? sourceText(r) + ": " : "") + '"' + clip(r.summary, 80) + '"';
    if (r.verified) s += "  verified: " + verifiedText(r.verified);
    return s;
  }
  if (e.kind === "rotation-failed" && e.rotation && e.rotation.cancelled) return e.text;
  if (e.kind === "rotation-failed" && e.rotation) return "✗ rotation failed: " + e.rotation.method + " (" + e.rotation.reason + ")" + (e.rotation.error ? ": " + e.rotation.error : "");
  let s = e.text || e.kind;
  if (e.kind === "turn" && e.context) s += "  " + ctxText(e.context).slice(4);
  return s;
}
function clip(s, n) { return s.length <= n ? s : s.slice(0, n - 1) + "…"; }

// feedLimit bounds a feed on a page left open for days.
const feedLimit = 300;
function prependFeed(feed, item) {
  feed.prepend(item);
  while (feed.children.length > feedLimit) feed.lastChild.remove();
}

function feedItem(e, showSession) {
  return el("li", { class: e.kind, "data-seq": e.seq },
    time(e.at) + " " + (showSession ? e.group + "/" + e.session + "  " : "") + eventText(e));
}

// live opens the event stream and calls onEvent / onSessions; the header's
// dot says whether it is connected. EventSource reconnects by itself.
let source = null;
function live(query, handlers) {
  if (source) source.close();
  source = new EventSource("/api/events" + query);
  const dot = document.getElementById("live");
  source.onopen = () => dot.classList.add("on");
  source.onerror = () => dot.classList.remove("on");
  if (handlers.event) source.addEventListener("event", (m) => handlers.event(JSON.parse(m.data)));
  if (handlers.sessions) source.addEventListener("sessions", (m) => handlers.sessions(JSON.parse(m.data).sessions));
}

// throttled runs fn at most once at a time: a call while it runs makes it
// run once more after, so bursts of events cost two fetches, not one each.
function throttled(fn) {
  let running = false, again = false;
  const run = async () => {
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } catch (err) { /* the next event tries again */ }
    running = false;
    if (again) { again = false; run(); }
  };
  return run;
}

function showError(err) {
  main.replaceChildren(el("p", { class: "answer error" }, String(err.message || err)));
}

// ---- groups page

async function groupsPage() {
  document.title = "nid: groups";
  const { groups } = await api("group.list");
  const body = el("tbody");
  main.replaceChildren(el("h1", {}, "Groups"),
    groups.length === 0 ? el("p", { class: "muted" }, "No group is running: start them with nid up.") :
      el("table", { id: "groups" }, el("thead", {}, el("tr", {}, el("th", {}, "group"), el("th", {}, "sessions"), el("th", {}, "working"), el("th", {}, "fullest context"))), body));
  const render = (sessions) => {
    body.replaceChildren(...groups.map((g) => {
      const ss = sessions.filter((s) => s.group === g);
      const fullest = ss.reduce((a, s) => (s.context.percent || 0) > (a ? a.context.percent || 0 : -1) ? s : a, null);
      return el("tr", {}, el("td", {}, el("a", { href: "/groups/" + g }, g)), el("td", {}, ss.length),
        el("td", {}, ss.filter((s) => s.status === "working").length), el("td", {}, fullest ? ctxCell(fullest.context) : "—"));
    }));
  };
  render((await api("session.list")).sessions);
  live("", { sessions: render });
}

// ---- group page

// holders remembers who holds each attached session (nid attach): the
// listing says only the status, the session's view says who.
const holders = new Map();

// statusCell is a session's status in a table; an attached one says who
// holds it, asked of its view once.
function statusCell(s) {
  const td = el("td", { class: "status-" + s.status }, s.status);
  if (s.status !== "attached") return td;
  const ref = s.group + "/" + s.name;
  const show = (who) => { td.textContent = "attached by " + who; };
  if (holders.has(ref)) show(holders.get(ref));
  else api("session.get", { session: ref }).then((v) => {
    if (!v.attach) return;
    holders.set(ref, v.attach.who);
    show(v.attach.who);
  }).catch(() => {});
  return td;
}

async function groupPage(group) {
  document.title = "nid: " + group;
  const g = await api("group.get", { group });
  const body = el("tbody");
  const stats = el("tbody");
  const feed = el("ul", { class: "feed", id: "feed" });
  // Through a div: replaceChildren itself would show a missing part as
  // the text "null".
  main.replaceChildren(...el("div", {},
    el("h1", {}, "Group " + group),
    g.goal ? el("p", {}, g.goal) : null,
    el("p", { class: "muted", id: "policy" }, "rotate: " + g.policyText),
    (g.learned || []).length ? el("p", { class: "muted", id: "learned" }, "learned: " + g.learnedText) : null,
    el("table", { id: "sessions" }, el("thead", {}, el("tr", {}, ["session", "agent", "status", "host", "context", "rotations", "turns"].map((h) => el("th", {}, h)))), body),
    el("h2", {}, "Rotations"),
    el("table", { id: "rotation-stats" }, el("thead", {}, el("tr", {},
      ["session", "compact", "handoff", "vendor compact", "failed", "handoffs verified", "reclaimed per rotation"].map((h) => el("th", {}, h)))), stats),
    el("h2", {}, "Feed"), feed).childNodes);
  const renderStats = (sessions) => {
    stats.replaceChildren(...sessions.map((x) => {
      const st = x.stats, n = st.compact + st.handoff + st.vendor;
      return el("tr", { "data-session": x.session.split("/")[1] },
        el("td", {}, el("a", { href: "/sessions/" + x.session }, x.session.split("/")[1])),
        el("td", {}, st.compact), el("td", {}, st.handoff), el("td", {}, st.vendor), el("td", {}, st.failed + (st.cancelled ? " (+" + st.cancelled + " cancelled)" : "")),
        el("td", {}, st.checked ? st.verified + " of " + st.checked + " (" + Math.round(100 * st.verified / st.checked) + "%)" : st.notAsked ? "not asked" : "—"),
        el("td", {}, n ? tokens(st.reclaimedPerRotation) : "—"));
    }));
  };
  const refreshStats = throttled(async () => renderStats((await api("session.rotations", { group })).sessions));
  const render = (sessions) => {
    body.replaceChildren(...sessions.map((s) => el("tr", { "data-session": s.name },
      el("td", {}, el("a", { href: "/sessions/" + s.group + "/" + s.name }, s.name)),
      el("td", {}, s.agent),
      statusCell(s),
      el("td", { class: "host" }, s.host || "—"),
      el("td", {}, ctxCell(s.context)),
      el("td", {}, "↻" + (s.context.rotations || 0)),
      el("td", {}, s.context.totalTurns || 0))));
  };
  render((await api("session.list", { group })).sessions);
  await refreshStats();
  live("?backlog=20&group=" + encodeURIComponent(group), {
    sessions: render,
    event: (e) => {
      prependFeed(feed, feedItem(e, true));
      if (e.rotation) refreshStats();
    },
  });
}

// ---- the context chart

// markerKind is how the chart marks a rotation: nid's compaction, a
// handoff, or the compaction the agent's CLI did by itself.
function markerKind(p) { return p.reason === "vendor" ? "vendor" : p.rotation; }
const markerNames = { compact: "compact", handoff: "handoff", vendor: "vendor compact" };

// contextChart draws the session's context over its recent turns: percent
// of the window per turn, the threshold it rotates at, and each rotation
// marked by method. A healthy session is a sawtooth; one that thrashes, a
// staircase of markers close together.
function contextChart(points) {
  const W = 720, H = 220, left = 40, right = 12, top = 12, bottom = 28;
  const pw = W - left - right, ph = H - top - bottom;
  const shown = points.filter((p) => p.window > 0);
  const root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", id: "context-chart-svg", role: "img",
    "aria-label": "context per turn, " + shown.length + " points" });
  const y = (pct) => top + ph * (1 - Math.min(100, Math.max(0, pct)) / 100);
  for (const g of [0, 25, 50, 75, 100]) {
    root.append(svg("line", { class: "grid", x1: left, x2: W - right, y1: y(g), y2: y(g) }),
      svg("text", { class: "axis", x: left - 6, y: y(g) + 4, "text-anchor": "end" }, g + "%"));
  }
  if (shown.length === 0) {
    root.append(svg("text", { class: "axis", x: left + pw / 2, y: top + ph / 2, "text-anchor": "middle" },
      points.length ? "the agent reports no usage: nothing to draw" : "no turns yet"));
    return root;
  }
  const x = (i) => left + (shown.length === 1 ? pw / 2 : (pw * i) / (shown.length - 1));
  const pct = (p) => (100 * p.used) / p.window;
  const xy = shown.map((p, i) => x(i).toFixed(1) + "," + y(pct(p)).toFixed(1));
  const thresholds = shown.map((p, i) => p.threshold > 0 ? x(i).toFixed(1) + "," + y((100 * p.threshold) / p.window).toFixed(1) : null);
  // The threshold can move (a learned point, a new policy): one segment
  // per stretch where it is known.
  let run = [];
  for (const t of thresholds.concat([null])) {
    if (t) { run.push(t); continue; }
    if (run.length) root.append(svg("polyline", { class: "threshold-line", points: (run.length === 1 ? [run[0], run[0]] : run).join(" ") }));
    run = [];
  }
  root.append(svg("polyline", { class: "context-line", points: xy.join(" ") }));
  shown.forEach((p, i) => {
    const label = "turn " + p.turn + ": " + Math.floor(pct(p)) + "% (" + tokens(p.used) + " of " + tokens(p.window) + ")";
    if (!p.rotation) {
      root.append(svg("circle", { class: "point", cx: x(i), cy: y(pct(p)), r: 2.5, "data-turn": p.turn }, svg("title", {}, label)));
      return;
    }
    const kind = markerKind(p);
    root.append(svg("g", { class: "marker marker-" + kind, "data-turn": p.turn },
      svg("line", { x1: x(i), x2: x(i), y1: top, y2: top + ph }),
      svg("circle", { cx: x(i), cy: y(pct(p)), r: 5 }),
      svg("title", {}, "↻ " + markerNames[kind] + " (" + p.reason + ") at " + label)));
  });
  const first = shown[0].turn, last = shown[shown.length - 1].turn;
  root.append(svg("text", { class: "axis", x: left, y: H - 8 }, "turn " + first),
    svg("text", { class: "axis", x: W - right, y: H - 8, "text-anchor": "end" }, "turn " + last));
  return root;
}

function chartLegend() {
  return el("p", { class: "legend" },
    el("span", { class: "key key-point" }, "turn"), el("span", { class: "key key-threshold" }, "rotate threshold"),
    ...["compact", "handoff", "vendor"].map((k) => el("span", { class: "key key-" + k }, markerNames[k])));
}

// ---- session page

// handbackText says what the last hand-back found, as nid show does.
function handbackText(h) {
  const pct = (c) => (c.percent === undefined || c.percent === null ? "unknown" : Math.round(c.percent) + "%");
  return (h.expired ? "taken back from " : "handed back by ") + h.who + " at " + time(h.until) + ": context " +
    pct(h.before) + " → " + pct(h.after) + ", " + (h.handTurns || 0) + " turns by hand" +
    (h.compactions ? ", " + h.compactions + " compactions" : "") + (h.note ? " (" + h.note + ")" : "");
}

async function sessionPage(group, name) {
  const ref = group + "/" + name;
  document.title = "nid: " + ref;
  let s = await api("session.get", { session: ref });
  const meter = el("div", { class: "meter", id: "meter" });
  const meterText = el("p", { class: "meter-text", id: "meter-text" });
  const status = el("span", { id: "status" });
  const holder = el("p", { id: "holder" });
  const renderHold = (v) => {
    const parts = [];
    if (v.attach) parts.push("attached by " + v.attach.who + " since " + time(v.attach.since) +
      (v.attach.ready ? "" : v.attach.waitingForTurn ? " (waiting for turn " + v.attach.waitingForTurn + " to end)" : " (waiting for its agent to close)"));
    if (v.lastHandback) parts.push(handbackText(v.lastHandback));
    holder.textContent = parts.join(" · ");
  };
  const mode = el("select", { id: "rotate-mode" },
    el("option", { value: "" }, "group's mode"), el("option", { value: "auto" }, "auto"),
    el("option", { value: "compact" }, "compact"), el("option", { value: "handoff" }, "handoff"));
  const answer = el("p", { id: "rotate-answer" });
  const history = el("tbody", { id: "history" });
  const chart = el("figure", { class: "chart-box", id: "context-chart" });
  const feed = el("ul", { class: "feed", id: "feed" });
  const tail = el("ul", { class: "transcript", id: "transcript" });
  const rotate = async () => {
    answer.className = "answer";
    answer.textContent = "asking…";
    try {
      const a = await api("session.rotate", { session: ref, mode: mode.value || undefined });
      answer.dataset.when = a.when;
      answer.textContent = a.message;
    } catch (err) {
      answer.className = "answer error";
      answer.textContent = err.message;
    }
  };
  // Stop and Start say in the same answer line what happened.
  const act = (method, body, said) => async () => {
    answer.className = "answer";
    answer.textContent = "asking…";
    try {
      const a = await api(method, Object.assign({ session: ref }, body));
      answer.dataset.when = "";
      answer.textContent = said(a);
    } catch (err) {
      answer.className = "answer error";
      answer.textContent = err.message;
    }
  };
  const stop = act("session.stop", {}, (a) => "stopped " + ref + "; " +
    (a.released.length ? "released " + a.released.join(", ") : "it held no tasks or locks"));
  const start = act("session.start", {}, () => "started " + ref + "; it goes on in the same conversation");
  main.replaceChildren(
    el("h1", {}, "Session ", el("a", { href: "/groups/" + group }, group), "/" + name),
    el("p", {}, status, s.workflowURL ? el("span", {}, " · ", el("a", { href: s.workflowURL, target: "_blank", rel: "noopener" }, "workflow in Temporal Web UI")) : null),
    el("p", { class: "muted", id: "attach" }, "take it over in its agent's own CLI, on host " + (s.host || "its host") + ": ",
      el("code", {}, "nid attach " + ref)),
    holder,
    el("h2", {}, "Context"), meter, meterText,
    el("h2", {}, "Context per turn"), chart, chartLegend(),
    el("div", { class: "actions" }, el("button", { id: "rotate", onclick: rotate }, "Rotate"), mode,
      el("button", { id: "stop", onclick: stop }, "Stop"), el("button", { id: "start", onclick: start }, "Start")), answer,
    el("h2", {}, "Rotations"),
    el("table", {}, el("thead", {}, el("tr", {}, ["#", "time", "method", "reason", "before → after", "conversation", "cost", "summary", "facts", "verified"].map((h) => el("th", {}, h)))), history),
    el("div", { class: "grid" },
      el("div", {}, el("h2", {}, "Feed"), feed),
      el("div", {}, el("h2", {}, "Transcript"), tail)));

  const renderContext = (c, policy, st, agent) => {
    const pct = c.percent === undefined || c.percent === null ? null : c.percent;
    // The effective threshold, as the session computes it: the least of
    // contextPercent, contextTokens and what nid learned of the vendor.
    const t = c.threshold;
    const at = t && t.percent ? t.percent : (policy ? policy.contextPercent : 0);
    const label = t && t.percent ? "rotate at " + Math.floor(t.percent) + "% = " + tokens(t.tokens) + " (" + t.by + ")" : "rotate at " + at + "%";
    meter.replaceChildren(
      el("div", { class: "fill" + (pct !== null && Math.floor(pct) >= yellowFrom ? " warn" : ""), style: { width: Math.min(100, pct || 0) + "%" } }),
      at > 0 && policy && policy.mode !== "off" ? el("div", { class: "threshold", id: "threshold", style: { left: Math.min(100, at) + "%" }, title: label }, el("span", {}, label)) : null);
    meterText.textContent = ctxText(c) + (pct !== null ? " · " + tokens(c.usedTokens) + " used of " + tokens(c.windowTokens) : " · the agent reports no usage") +
      " · " + c.source + " · ↻" + (c.rotations || 0) + " · turns " + (c.totalTurns || 0);
    if (st) { status.className = "status-" + st; status.textContent = (agent ? agent + " · " : "") + st; }
  };
  const rotations = new Set();
  const addHistory = (e) => {
    if (!e.rotation || rotations.has(e.seq)) return;
    rotations.add(e.seq);
    const r = e.rotation;
    history.prepend(el("tr", { class: e.kind },
      el("td", {}, r.number), el("td", {}, time(e.at)), el("td", {}, r.method + (r.cancelled ? " cancelled" : r.ok ? "" : " ✗")),
      el("td", {}, r.reason + (r.fellBack ? ", compact failed" : "")),
      el("td", {}, tokens(r.beforeTokens) + " → " + tokens(r.afterTokens)),
      el("td", {}, (r.oldConversation || "—") + " → " + (r.newConversation || "—")),
      el("td", {}, costText(r)),
      el("td", {}, r.error ? "✗ " + r.error : summaryCell(r)),
      el("td", {}, factsText(r)),
      el("td", { class: r.verified ? "verified-" + r.verified : "" }, r.verified ? verifiedText(r.verified) + (r.verifyNote ? ": " + r.verifyNote : "") : "—")));
  };
  const drawChart = throttled(async () => {
    const v = await api("session.get", { session: ref });
    chart.replaceChildren(contextChart(v.points || []));
  });
  // One transcript fetch at a time: events arrive in bursts, and two
  // fetches after the same entry would show its successors twice.
  let lastEntry = 0, fetching = false, again = false;
  const transcript = async () => {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const t = await api("session.transcript", { session: ref, after: lastEntry, limit: 100 });
      for (const x of t.entries) {
        lastEntry = Math.max(lastEntry, x.seq);
        const mark = { prompt: ">", output: "<", tool: "·", rotation: "↻", error: "✗" }[x.kind] || x.kind;
        tail.append(el("li", { class: x.kind }, time(x.at) + " " + mark + " " + (x.method ? x.method + ": " : "") + x.text));
      }
      while (tail.children.length > 200) tail.firstChild.remove();
      tail.scrollTop = tail.scrollHeight;
    } catch (err) { /* transcripts live on the worker's host; the page works without them */ }
    fetching = false;
    if (again) { again = false; transcript(); }
  };
  renderContext(s.context, s.policy, s.status, s.agent);
  renderHold(s);
  chart.replaceChildren(contextChart(s.points || []));
  for (const e of s.events) if (e.rotation) addHistory(e);
  transcript();
  let policy = s.policy;
  live("?backlog=30&session=" + encodeURIComponent(ref), {
    event: (e) => {
      prependFeed(feed, feedItem(e, false));
      if (e.rotation) addHistory(e);
      if (e.kind === "attach") api("session.get", { session: ref }).then(renderHold).catch(() => {});
      if (e.context) renderContext(e.context, policy);
      if (e.context || e.rotation) drawChart();
      if (e.kind === "policy") api("session.get", { session: ref }).then((v) => { policy = v.policy; renderContext(v.context, policy, v.status, v.agent); });
      transcript();
    },
    sessions: (ss) => { const x = ss.find((y) => y.name === name); if (x) renderContext(x.context, policy, x.status, x.agent); },
  });
}

// ---- inbox page

async function inboxPage() {
  document.title = "nid: inbox";
  const body = el("tbody", { id: "inbox" });
  main.replaceChildren(el("h1", {}, "Inbox"),
    el("table", {}, el("thead", {}, el("tr", {}, ["time", "who", "kind", "what"].map((h) => el("th", {}, h)))), body));
  const render = async () => {
    const { items } = await api("inbox.list");
    body.replaceChildren(...(items.length === 0 ? [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "inbox empty"))] :
      items.slice().reverse().map((it) => el("tr", {}, el("td", {}, new Date(it.at).toLocaleString()),
        el("td", {}, it.session ? el("a", { href: "/sessions/" + it.group + "/" + it.session }, it.group + "/" + it.session) : it.group),
        el("td", {}, it.kind), el("td", {}, it.text)))));
  };
  await render();
  live("", { event: (e) => { if (e.kind === "rotation-failed" || e.kind === "turn-failed") render(); } });
}

function route() {
  const p = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (p.length === 0) return groupsPage();
  if (p[0] === "inbox" && p.length === 1) return inboxPage();
  if (p[0] === "groups" && p.length === 2) return groupPage(p[1]);
  if (p[0] === "sessions" && p.length === 3) return sessionPage(p[1], p[2]);
  main.replaceChildren(el("p", {}, "No such page. ", el("a", { href: "/" }, "Groups")));
}

// logout ends this browser's login (POST /logout, with the header every
// call of the dashboard's own sends) and shows the login form.
async function logout() {
  const r = await fetch("/logout", { method: "POST", credentials: "same-origin", headers: { "X-Nid-Dashboard": "1" } });
  if (!r.ok && r.status !== 401) throw new Error("logging out failed: " + r.statusText);
  location.assign("/");
}
document.getElementById("logout").addEventListener("click", () => logout().catch(showError));

route().catch(showError);
