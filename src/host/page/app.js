// The approvals page: an Agent Host Protocol v1 client of this host's /host endpoint.
// It authenticates with a bearer token, lists live sessions, watches each session's
// pending tool confirmations, and answers them with chat/toolCallConfirmed.
"use strict";

const ROOT = "ahp-root://";
const state = { ws: null, nextId: 1, calls: new Map(), sessions: new Map(), sent: new Set() };

function $(sel) { return document.querySelector(sel); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return e;
}

function token() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("ahp-wrap-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("ahp-wrap-token");
}

function setStatus(text) { $("#status").textContent = text; }

function request(method, params) {
  const id = state.nextId++;
  return new Promise((resolve, reject) => {
    state.calls.set(id, { resolve, reject });
    state.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params: { channel: ROOT, ...params } }));
  });
}

function notify(method, params) {
  state.ws.send(JSON.stringify({ jsonrpc: "2.0", method, params }));
}

function connect() {
  const t = token();
  if (!t) { showLogin(""); return; }
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + location.host + "/host");
  state.ws = ws;
  ws.onmessage = (ev) => onMessage(JSON.parse(ev.data));
  ws.onclose = () => {
    if (state.ws !== ws) return;
    setStatus("disconnected; reconnecting…");
    setTimeout(connect, 1000);
  };
  ws.onopen = () => start(t).catch((e) => {
    if (e && e.code === -32007) {
      sessionStorage.removeItem("ahp-wrap-token");
      state.ws = null;
      ws.close();
      showLogin("That token was refused.");
    } else {
      setStatus("error: " + (e && e.message));
    }
  });
}

async function start(t) {
  await request("initialize", {
    protocolVersions: ["1.0.0"],
    clientId: "approvals-page-" + Math.random().toString(16).slice(2),
    clientInfo: { name: "ahp-wrap approvals page" },
  });
  await request("authenticate", { resource: "ahp-wrap:approvals", token: t });
  state.sessions.clear();
  await request("subscribe", { channel: ROOT });
  const list = await request("listSessions", {});
  for (const summary of list.items) await watch(summary);
  $("#login").hidden = true;
  $("#main").hidden = false;
  setStatus("live");
  render();
}

function showLogin(error) {
  $("#main").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = error;
  setStatus("signed out");
}

async function watch(summary) {
  const uri = summary.resource;
  const id = uri.slice("ahp-session:/".length);
  const s = { summary, chat: "ahp-chat:/" + id, waiting: new Map(), calls: new Map() };
  state.sessions.set(uri, s);
  const session = await request("subscribe", { channel: uri });
  for (const r of session.snapshot.state.inputNeeded || []) s.waiting.set(r.id, r);
  const chat = await request("subscribe", { channel: s.chat });
  const turn = chat.snapshot.state.activeTurn;
  for (const p of (turn && turn.responseParts) || []) {
    if (p.kind === "toolCall") s.calls.set(p.toolCall.toolCallId, p.toolCall.status);
  }
  render();
}

function onMessage(msg) {
  if (msg.id !== undefined && msg.id !== null) {
    const call = state.calls.get(msg.id);
    state.calls.delete(msg.id);
    if (call) msg.error ? call.reject(msg.error) : call.resolve(msg.result);
    return;
  }
  const p = msg.params || {};
  if (msg.method === "root/sessionAdded") { watch(p.summary); return; }
  if (msg.method === "root/sessionRemoved") { state.sessions.delete(p.session); render(); return; }
  if (msg.method !== "action") return;
  const a = p.action;
  const bySession = state.sessions.get(p.channel);
  const byChat = [...state.sessions.values()].find((s) => s.chat === p.channel);
  if (bySession && a.type === "session/inputNeededSet") bySession.waiting.set(a.request.id, a.request);
  if (bySession && a.type === "session/inputNeededRemoved") bySession.waiting.delete(a.id);
  if (byChat && a.toolCallId) {
    const status = { "chat/toolCallStart": "streaming", "chat/toolCallComplete": "completed" }[a.type]
      || (a.type === "chat/toolCallConfirmed" ? (a.approved ? "running" : "cancelled") : null);
    if (status) byChat.calls.set(a.toolCallId, status);
  }
  render();
}

function answer(s, req, approved, card) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  state.sent.add(req.id);
  notify("dispatchAction", {
    channel: req.chat,
    clientSeq: state.nextId++,
    action: {
      type: "chat/toolCallConfirmed",
      turnId: req.turnId,
      toolCallId: req.toolCall.toolCallId,
      approved,
      ...(approved ? { confirmed: "user-action" } : { reason: "denied" }),
    },
  });
  card.querySelector(".sent").textContent = approved ? "Approved; waiting for the agent…" : "Denied; waiting for the agent…";
}

function pendingCard(s, req) {
  const meta = s.summary._meta || {};
  const why = req.toolCall._meta || {};
  const card = el("div", { class: "card", "data-call": req.toolCall.toolCallId },
    el("div", { class: "command" }, req.toolCall.toolInput || req.toolCall.invocationMessage),
    el("dl", {},
      el("dt", {}, "Tool"), el("dd", { class: "tool" }, req.toolCall.toolName),
      el("dt", {}, "Reason"), el("dd", { class: "reason" }, why.reason || ""),
      el("dt", {}, "Rule"), el("dd", { class: "rule" }, why.rule || "—"),
      el("dt", {}, "Agent"), el("dd", { class: "agent" }, (meta.framework || "") + " (" + (meta.agent || "") + ")"),
      el("dt", {}, "Directory"), el("dd", { class: "cwd" }, meta.cwd || ""),
      el("dt", {}, "Deadline"), el("dd", {}, why.deadline || "")),
    el("button", { class: "approve", type: "button" }, "Approve"),
    el("button", { class: "deny", type: "button" }, "Deny"),
    el("span", { class: "sent" }, ""));
  card.querySelector(".approve").onclick = () => answer(s, req, true, card);
  card.querySelector(".deny").onclick = () => answer(s, req, false, card);
  if (state.sent.has(req.id)) for (const b of card.querySelectorAll("button")) b.disabled = true;
  return card;
}

function render() {
  const pending = $("#pending");
  const cards = [];
  const rows = [];
  for (const s of state.sessions.values()) {
    for (const req of s.waiting.values()) cards.push(pendingCard(s, req));
    const m = s.summary._meta || {};
    rows.push(el("tr", {}, el("td", {}, m.agent || ""), el("td", {}, m.framework || ""),
      el("td", { class: "cwd" }, m.cwd || ""), el("td", {}, m.depth ?? ""),
      el("td", {}, m.started || s.summary.createdAt), el("td", {}, s.calls.size)));
  }
  pending.replaceChildren(...cards);
  $("#no-pending").hidden = cards.length > 0;
  $("#pending-count").textContent = cards.length;
  $("#sessions tbody").replaceChildren(...rows);
  $("#session-count").textContent = rows.length;
}

$("#login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("ahp-wrap-token", $("#token").value);
  $("#token").value = "";
  connect();
});

connect();
