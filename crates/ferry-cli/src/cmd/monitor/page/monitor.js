// ferry monitor's page: renders /api/state (kept current through /api/events) as a graph of
// processes and topics, a table of publishers and subscribers, and a page per topic. Served
// from the ferry binary; no library, no network.
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token");
// ?poll: read /api/state every second instead of the event stream (for proxies that hold
// streams back, and for headless browsers that wait for the page to stop loading).
const polling = params.has("poll") || !window.EventSource;
const withToken = (path) => (token ? path + "?token=" + encodeURIComponent(token) : path);
const COLORS = { shm: "#2f6fde", udp: "#e07b12", auto: "#8a4fd1", multicast: "#c2185b", zenoh: "#1b9e77" };
const LINK_WORDS = { shm: "shared memory", udp: "UDP", auto: "auto", multicast: "UDP multicast",
  zenoh: "the Zenoh bridge" };
// How an endpoint's messages travel: its transport, or the multicast group or bridge it uses.
const linkOf = (e) => (e.bridge ? e.bridge : e.multicast ? "multicast" : e.transport);
let state = null;
// Each endpoint's rate and bandwidth history: from /api/state at first, then one sample more
// with each event (which carries no history).
const history = new Map();
const HISTORY = 600;
let sortKey = "topic";
let sortDir = 1;
let filter = "";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function fmtRate(r) {
  if (r === null || r === undefined) return "–";
  return r >= 100 ? r.toFixed(0) : r.toFixed(1);
}

function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  const units = ["B/s", "KB/s", "MB/s", "GB/s"];
  let i = 0;
  while (b >= 1000 && i < units.length - 1) { b /= 1000; i++; }
  return (b >= 100 || i === 0 ? b.toFixed(0) : b.toFixed(1)) + " " + units[i];
}

function endpoints() {
  const out = [];
  for (const t of state.topics) {
    for (const e of t.endpoints) out.push(Object.assign({ topic: t.topic, domain: t.domain }, e));
  }
  return out;
}

function topicHref(t) {
  return "#/topic/" + encodeURIComponent(t.domain) + "/" + encodeURIComponent(t.topic);
}

// --- The graph: publishing processes, topics, subscribing processes, in three columns. -----

function renderGraph() {
  // This host's topics, and the topics only other hosts announce.
  const topics = state.topics.slice();
  for (const r of state.remote) {
    if (!topics.some((t) => t.topic === r.topic)) {
      topics.push({ domain: state.domain, topic: r.topic, type: null, endpoints: [], remoteOnly: true });
    }
  }
  const proc = (e) => e.node + " (" + e.pid + ")";
  const pubs = new Map();
  const subs = new Map();
  for (const t of topics) {
    for (const e of t.endpoints) {
      const side = e.role === "publisher" ? pubs : subs;
      const k = proc(e);
      const seen = side.get(k) || { name: k, alive: false };
      seen.alive = seen.alive || e.alive;
      side.set(k, seen);
    }
  }
  // Another host is one box per side, named by its address, however many endpoints it has.
  const hostKey = (r) => "host " + r.host;
  for (const r of state.remote) {
    const side = r.role === "publisher" ? pubs : subs;
    const k = hostKey(r);
    const seen = side.get(k) || { name: k, alive: true, remote: true, count: 0 };
    seen.count++;
    seen.name = `${k} (${seen.count} ${r.role}${seen.count > 1 ? "s" : ""})`;
    side.set(k, seen);
  }
  const row = 30;
  const rows = Math.max(topics.length, pubs.size, subs.size, 1);
  const width = 1040;
  const height = rows * row + 20;
  const g = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "processes and topics" });
  const place = (map, x) => {
    let i = 0;
    for (const v of map.values()) {
      v.x = x; v.y = 10 + i * row + (rows - map.size) * row / 2; i++;
    }
  };
  place(pubs, 10);
  place(subs, 760);
  const topicAt = new Map();
  topics.forEach((t, i) => topicAt.set(t.domain + "/" + t.topic,
    { x: 380, y: 10 + i * row + (rows - topics.length) * row / 2 }));
  // Edges first, under the boxes.
  for (const t of topics) {
    const at = topicAt.get(t.domain + "/" + t.topic);
    for (const e of t.endpoints) {
      const p = (e.role === "publisher" ? pubs : subs).get(proc(e));
      const [x1, y1, x2, y2] = e.role === "publisher"
        ? [p.x + 270, p.y + 11, at.x, at.y + 11]
        : [at.x + 280, at.y + 11, p.x, p.y + 11];
      const mid = (x1 + x2) / 2;
      g.append(svg("path", {
        d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
        fill: "none", stroke: COLORS[linkOf(e)] || "#888", "stroke-width": 1.6,
        "stroke-dasharray": e.alive ? "" : "4 3", "data-edge": e.id,
        "data-link": linkOf(e),
      }, svg("title", {}, `${e.role} ${proc(e)} on ${t.topic} over ${LINK_WORDS[linkOf(e)] || e.transport}` +
        (e.alive ? "" : " (gone)"))));
    }
  }
  for (const r of state.remote) {
    const at = topicAt.get(state.domain + "/" + r.topic);
    const p = (r.role === "publisher" ? pubs : subs).get(hostKey(r));
    if (!at || !p) continue;
    const [x1, y1, x2, y2] = r.role === "publisher"
      ? [p.x + 270, p.y + 11, at.x, at.y + 11]
      : [at.x + 280, at.y + 11, p.x, p.y + 11];
    const mid = (x1 + x2) / 2;
    g.append(svg("path", {
      d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, fill: "none",
      stroke: COLORS.udp, "stroke-width": 1.6, "stroke-dasharray": "1 3", "data-remote": r.address,
      "data-host": r.host,
    }, svg("title", {}, `${r.role} at ${r.address} on ${r.topic} over UDP (another host)`)));
  }
  const box = (x, y, w, label, cls) => {
    const b = svg("g", {});
    b.append(svg("rect", { x, y, width: w, height: 22, rx: 4, class: cls }));
    b.append(svg("text", { x: x + 6, y: y + 15 }, label.length > 40 ? label.slice(0, 39) + "…" : label));
    return b;
  };
  for (const side of [pubs, subs]) {
    for (const v of side.values()) {
      g.append(box(v.x, v.y, 270, v.name, v.remote ? "hostbox" : v.alive ? "box" : "deadbox"));
    }
  }
  for (const t of topics) {
    const at = topicAt.get(t.domain + "/" + t.topic);
    const pubRate = t.endpoints.filter((e) => e.role === "publisher" && e.alive)
      .reduce((s, e) => s + (e.rate || 0), 0);
    const rate = t.remoteOnly ? "  (other hosts only)" : `  ${fmtRate(pubRate)}/s`;
    const label = `${t.topic}${state.domain ? "" : " [" + t.domain + "]"}${rate}` +
      (t.type ? "  " + t.type.name : "");
    const a = svg("a", { href: topicHref(t), "data-topic": t.topic });
    a.append(box(at.x, at.y, 280, label, "topicbox"));
    g.append(a);
  }
  const div = document.getElementById("graph");
  div.replaceChildren(...(topics.length ? [g] : [el("p", { class: "note" },
    "No topics yet" + (state.domain ? " in domain " + state.domain : "") + ".")]));
}

// --- Sparklines and charts. ----------------------------------------------------------------

function sparkline(values, w, h) {
  const s = svg("svg", { width: w, height: h, class: "spark" });
  if (values.length < 2) return s;
  const max = Math.max(...values, 1e-9);
  const pts = values.map((v, i) => `${(i / (values.length - 1)) * w},${h - 1 - (v / max) * (h - 2)}`);
  s.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: "#2f6fde", "stroke-width": 1 }));
  return s;
}

function chart(title, values, fmt) {
  const w = 460;
  const h = 130;
  const c = svg("svg", { width: w, height: h, class: "chart" });
  c.append(svg("text", { x: 8, y: 14 }, title));
  const max = Math.max(...values, 0);
  c.append(svg("text", { x: 8, y: 30 }, "max " + fmt(max)));
  c.append(svg("text", { x: w - 8, y: h - 4, "text-anchor": "end" },
    `last ${((values.length * state.period_ms) / 1000).toFixed(0)} s`));
  if (values.length >= 2 && max > 0) {
    const pts = values.map((v, i) => `${40 + (i / (values.length - 1)) * (w - 50)},${h - 16 - (v / max) * (h - 56)}`);
    c.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: "#2f6fde", "stroke-width": 1.5 }));
  }
  return c;
}

// --- The table. ----------------------------------------------------------------------------

const COLUMNS = [
  ["topic", "topic", true], ["role", "role", true], ["node", "node", true], ["pid", "pid"],
  ["transport", "transport", true], ["delivery", "delivery", true], ["state", "state", true],
  ["rate", "msg/s"], ["bandwidth", "bandwidth"], ["skipped", "skipped"], ["lost", "lost"],
  ["retransmitted", "retransmitted"], ["refused", "refused"], ["kernel_drops", "kernel drops"],
  ["waits", "waits"], ["timeouts", "timeouts"], ["history", "last minutes"],
];

function value(e, key) {
  if (key === "state") return e.alive ? "alive" : "gone";
  if (key === "refused") return e.refused.total || 0;
  if (key === "transport") return linkOf(e) === e.transport ? e.transport : e.transport + " (" + linkOf(e) + ")";
  return e[key];
}

function table(rows, withTopic) {
  const cols = COLUMNS.filter(([k]) => withTopic || k !== "topic");
  const head = el("tr", {});
  for (const [k, label, text] of cols) {
    const th = el("th", { class: text ? "text" : "", "data-key": k },
      label + (sortKey === k ? (sortDir > 0 ? " ▲" : " ▼") : ""));
    if (k !== "history") {
      th.onclick = () => { sortDir = sortKey === k ? -sortDir : 1; sortKey = k; render(); };
    }
    head.append(th);
  }
  rows.sort((a, b) => {
    const x = value(a, sortKey);
    const y = value(b, sortKey);
    return (x === y ? 0 : x === null || x === undefined ? -1 : y === null || y === undefined ? 1 : x < y ? -1 : 1) * sortDir;
  });
  const body = el("tbody", {});
  for (const e of rows) {
    const tr = el("tr", {
      class: e.alive ? "" : "dead", "data-endpoint": e.id, "data-role": e.role,
      "data-alive": String(e.alive), "data-rate": e.rate === null ? "" : e.rate.toFixed(2),
      "data-topic-row": e.topic,
    });
    for (const [k, , text] of cols) {
      let content;
      if (k === "history") content = sparkline(e.history.rate.slice(-120), 120, 20);
      else if (k === "topic") content = el("a", { href: topicHref(e) }, e.topic);
      else if (k === "rate") content = fmtRate(e.rate);
      else if (k === "bandwidth") content = fmtBytes(e.bandwidth);
      else content = String(value(e, k));
      const bad = ["skipped", "lost", "refused", "kernel_drops", "timeouts"].includes(k) && value(e, k) > 0;
      const td = el("td", { class: (text ? "text" : "") + (bad ? " bad" : "") }, content);
      if (k === "refused" && e.refused.total) {
        td.title = Object.entries(e.refused).filter(([r]) => r !== "total")
          .map(([r, n]) => r + " " + n).join(", ");
      }
      tr.append(td);
    }
    body.append(tr);
  }
  return el("table", {}, el("thead", {}, head), body);
}

function renderTable() {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  const rows = endpoints().filter((e) => {
    const hay = [e.topic, e.role, e.node, value(e, "transport"), e.delivery, e.alive ? "alive" : "gone"]
      .join(" ").toLowerCase();
    return words.every((w) => hay.includes(w));
  });
  const parts = [table(rows, true)];
  if (state.remote.length) {
    const head = el("tr", {}, ...["host", "topic", "role", "address", "delivery"].map((h) => el("th", { class: "text" }, h)));
    const remote = state.remote.slice().sort((a, b) => (a.host + a.topic < b.host + b.topic ? -1 : 1));
    const body = el("tbody", {}, ...remote.map((r) => el("tr", { "data-remote-row": r.topic },
      el("td", { class: "text" }, r.host), el("td", { class: "text" }, r.topic), el("td", { class: "text" }, r.role),
      el("td", { class: "text" }, r.address), el("td", { class: "text" }, r.delivery))));
    parts.push(el("h2", {}, "On other hosts (UDP discovery)"), el("table", {}, el("thead", {}, head), body));
  } else if (state.remote_note) {
    parts.push(el("p", { class: "note" }, "Other hosts: " + state.remote_note));
  }
  document.getElementById("table").replaceChildren(...parts);
}

// --- A topic's page. -----------------------------------------------------------------------

// The newest message of each shared-memory publisher of the topic shown (/api/last), asked for
// at most once a second while its page is open.
let last = { key: null, at: 0, body: null };

function askLast(domain, name) {
  const key = domain + "/" + name;
  const now = Date.now();
  if (last.key === key && now - last.at < 1000) return;
  last = { key, at: now, body: last.key === key ? last.body : null };
  const q = "domain=" + encodeURIComponent(domain) + "&topic=" + encodeURIComponent(name);
  fetch(withToken("/api/last") + (token ? "&" : "?") + q).then((r) => r.json()).then((body) => {
    if (last.key === key) { last.body = body; render(); }
  }).catch(() => {});
}

function lastSection(t) {
  const parts = [el("h2", {}, "Last message")];
  const b = last.body;
  if (!b) return parts.concat(el("p", { class: "note" }, "Reading…"));
  if (b.error) return parts.concat(el("p", { class: "note" }, b.error));
  if (b.type_problem) parts.push(el("p", { class: "note" }, "Not decoded: " + b.type_problem));
  for (const m of b.messages) {
    const box = el("div", { class: "lastmsg", "data-last-seq": String(m.seq) });
    box.append(el("p", {}, `From ${m.node}: message ${m.seq}, ${m.len} bytes` +
      (m.len * 2 > m.hex.length ? ` (the first ${m.hex.length / 2} as hex)` : "") + "."));
    if (m.decoded !== null) {
      // Indented by field; a list of numbers or strings on one line.
      const text = JSON.stringify(JSON.parse(m.decoded), null, 2)
        .replace(/\[\s+([^\[\]{}]*?)\s+\]/g, (_, inner) => "[" + inner.replace(/\s+/g, " ") + "]");
      box.append(el("pre", { class: "decoded" }, text));
    }
    else if (m.decode_error) box.append(el("p", { class: "note" }, "Not decoded: " + m.decode_error));
    box.append(el("pre", { class: "hex" }, (m.hex.match(/.{1,64}/g) || [""]).join("\n")));
    parts.push(box);
  }
  for (const u of b.unreadable) parts.push(el("p", { class: "note" }, "Not readable: " + u));
  if (!b.messages.length) {
    parts.push(el("p", { class: "note" }, "None to show: nothing sent yet, or every publisher " +
      "here sends over UDP only (the monitor reads a publisher's shared-memory ring, never " +
      "subscribes). ", el("code", {}, `ferry echo ${t.topic} --domain ${t.domain}`), " prints " +
      "what arrives."));
  }
  parts.push(el("p", { class: "note" }, "Read in place from each publisher's ring without " +
    "subscribing: neither the publishers nor their subscribers see the look."));
  return parts;
}

function renderTopic(domain, name) {
  const sec = document.getElementById("topic");
  const t = state.topics.find((x) => x.domain === domain && x.topic === name);
  if (!t) {
    sec.replaceChildren(el("h2", {}, name), el("p", { class: "note" },
      "This topic has no directory now: every end of it has gone."));
    return;
  }
  const type = t.type
    ? el("p", {}, "Type ", el("code", {}, t.type.name), `: ${t.type.encoding}, schema of ` +
      `${t.type.schema_bytes} bytes, hash ${t.type.hash}.`)
    : el("p", { class: "note" }, "Untyped: its messages are bytes whose meaning only the " +
      "applications know.");
  const rows = t.endpoints.map((e) => Object.assign({ topic: t.topic, domain: t.domain }, e));
  const charts = el("div", { class: "charts" });
  for (const e of rows) {
    const who = `${e.role} ${e.node} (${e.pid})${e.alive ? "" : " — gone"}`;
    charts.append(chart(who + ": messages/s", e.history.rate, fmtRate));
    charts.append(chart(who + ": bandwidth", e.history.bandwidth, fmtBytes));
  }
  sec.replaceChildren(
    el("h2", { "data-topic-page": t.topic }, `Topic ${t.topic}` + (t.service ? " (a service's)" : "") +
      ` in domain ${t.domain}`),
    type,
    table(rows, false),
    ...lastSection(t),
    el("h2", {}, "Over the last minutes"),
    charts,
  );
  askLast(domain, name);
}

// --- Everything. ---------------------------------------------------------------------------

function render() {
  if (!state) return;
  document.getElementById("scope").textContent =
    (state.domain ? "domain " + state.domain : "every domain") + " · " +
    new Date(state.time_ms).toLocaleTimeString() + ` · read in ${state.build_ms.toFixed(1)} ms`;
  document.getElementById("unreadable").textContent = state.unreadable.length
    ? "Not readable: " + state.unreadable.join("; ") : "";
  const m = location.hash.match(/^#\/topic\/([^/]*)\/(.*)$/);
  document.getElementById("overview").hidden = !!m;
  document.getElementById("topic").hidden = !m;
  if (m) renderTopic(decodeURIComponent(m[1]), decodeURIComponent(m[2]));
  else { renderGraph(); renderTable(); }
}

function status(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + cls;
}

function start() {
  document.getElementById("filter").oninput = (ev) => { filter = ev.target.value; render(); };
  window.onhashchange = render;
  fetch(withToken("/api/lab")).then((r) => r.json()).then((lab) => {
    if (lab.report) {
      document.getElementById("lab").replaceChildren(
        el("a", { href: withToken(lab.report) }, "latest lab report"));
    }
  }).catch(() => {});
  const take = (s) => {
    for (const t of s.topics) {
      for (const e of t.endpoints) {
        let h = history.get(e.id);
        if (e.history) {
          h = { rate: e.history.rate.slice(), bandwidth: e.history.bandwidth.slice() };
        } else if (e.rate !== null) {
          h = h || { rate: [], bandwidth: [] };
          h.rate.push(e.rate);
          h.bandwidth.push(e.bandwidth);
          if (h.rate.length > HISTORY) { h.rate.shift(); h.bandwidth.shift(); }
        }
        e.history = h || { rate: [], bandwidth: [] };
        history.set(e.id, e.history);
      }
    }
    const live = new Set(s.topics.flatMap((t) => t.endpoints.map((e) => e.id)));
    for (const id of history.keys()) if (!live.has(id)) history.delete(id);
    state = s;
    status("live", "live");
    render();
  };
  fetch(withToken("/api/state")).then((r) => r.json()).then(take)
    .catch(() => status("cannot reach the monitor", "lost"));
  if (polling) {
    setInterval(() => fetch(withToken("/api/state")).then((r) => r.json()).then(take)
      .catch(() => status("cannot reach the monitor", "lost")), 1000);
  } else {
    const events = new EventSource(withToken("/api/events"));
    events.onmessage = (ev) => take(JSON.parse(ev.data));
    events.onerror = () => status("reconnecting…", "lost");
  }
}

start();
