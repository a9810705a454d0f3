// The approvals page: an Agent Host Protocol v1 client of this host's /host endpoint.
// It authenticates with a bearer token (whose scopes the result's _meta gives), lists live
// sessions, watches each session's pending tool confirmations, and answers them with
// chat/toolCallConfirmed. An answer is a write-ahead dispatch: the host echoes it with its
// origin when taken, or with a rejectionReason when refused, which the card then shows.
"use strict";

const ROOT = "ahp-root://";
const state = {
  ws: null, nextId: 1, calls: new Map(), sessions: new Map(),
  clientId: "", clientSeq: 1, mayAnswer: true,
  // Our answers, by request id ({req, session, approved, refused}), until the host's echo
  // says it took them (the card goes) or refused them (the card says why, even when the
  // session has ended meanwhile).
  answers: new Map(),
  // The request id of each answer in flight, by clientSeq.
  dispatched: new Map(),
};

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
  state.clientId = "approvals-page-" + Math.random().toString(16).slice(2);
  await request("initialize", {
    protocolVersions: ["1.0.0"],
    clientId: state.clientId,
    clientInfo: { name: "ahp-wrap approvals page" },
  });
  const authed = await request("authenticate", { resource: "ahp-wrap:approvals", token: t });
  // A host that does not say what the token allows gets the buttons: it refuses what the
  // token may not do, and the card says so.
  const meta = (authed && authed._meta) || {};
  state.mayAnswer = !Array.isArray(meta.scopes) || meta.scopes.includes("approve");
  $("#who").textContent = (meta.token || "") + (state.mayAnswer ? "" : " · view only");
  state.sessions.clear();
  state.answers.clear();
  state.dispatched.clear();
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
  const ours = p.origin && p.origin.clientId === state.clientId ? state.dispatched.get(p.origin.clientSeq) : undefined;
  if (ours !== undefined) {
    state.dispatched.delete(p.origin.clientSeq);
    const mine = state.answers.get(ours);
    if (mine && p.rejectionReason) mine.refused = p.rejectionReason;
    else state.answers.delete(ours);
  }
  // A refused action changes nothing.
  if (p.rejectionReason) { render(); return; }
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

function answer(s, req, approved) {
  const clientSeq = state.clientSeq++;
  state.answers.set(req.id, { req, session: s, approved, refused: null });
  state.dispatched.set(clientSeq, req.id);
  notify("dispatchAction", {
    channel: req.chat,
    clientSeq,
    action: {
      type: "chat/toolCallConfirmed",
      turnId: req.turnId,
      toolCallId: req.toolCall.toolCallId,
      approved,
      ...(approved ? { confirmed: "user-action" } : { reason: "denied" }),
    },
  });
  render();
}

// What the card says about our answer, if we gave one: sent (no echo yet), or refused.
function answerLine(mine) {
  if (!mine) return el("span", { class: "sent" }, "");
  if (mine.refused) return el("p", { class: "refused error" }, "Refused: " + mine.refused);
  return el("span", { class: "sent" }, mine.approved ? "Approving…" : "Denying…");
}

// The card of request `req` of session `s`; `waiting` when the host still waits for it.
function pendingCard(s, req, waiting) {
  const mine = state.answers.get(req.id);
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
      el("dt", {}, "Deadline"), el("dd", { class: "deadline" }, why.deadline || "")));
  if (!state.mayAnswer) {
    card.append(el("p", { class: "view-only" }, "View only: this token may watch, not approve or deny."));
    return card;
  }
  if (mine && mine.refused && !waiting) {
    const dismiss = el("button", { class: "dismiss", type: "button" }, "Dismiss");
    dismiss.onclick = () => { state.answers.delete(req.id); render(); };
    card.append(answerLine(mine), dismiss);
    return card;
  }
  const approve = el("button", { class: "approve", type: "button" }, "Approve");
  const deny = el("button", { class: "deny", type: "button" }, "Deny");
  approve.onclick = () => answer(s, req, true);
  deny.onclick = () => answer(s, req, false);
  approve.disabled = deny.disabled = Boolean(mine);
  card.append(approve, deny, answerLine(mine));
  return card;
}

function render() {
  const pending = $("#pending");
  const cards = [];
  const rows = [];
  let waiting = 0;
  for (const s of state.sessions.values()) {
    waiting += s.waiting.size;
    for (const req of s.waiting.values()) cards.push(pendingCard(s, req, true));
    const m = s.summary._meta || {};
    rows.push(el("tr", {}, el("td", {}, m.agent || ""), el("td", {}, m.framework || ""),
      el("td", { class: "cwd" }, m.cwd || ""), el("td", {}, m.depth ?? ""),
      el("td", {}, m.started || s.summary.createdAt), el("td", {}, s.calls.size)));
  }
  // Our answers to requests no longer waiting stay until the host's echo.
  for (const [id, mine] of state.answers) {
    const s = state.sessions.get(mine.session.summary.resource);
    if (!s || !s.waiting.has(id)) cards.push(pendingCard(mine.session, mine.req, false));
  }
  pending.replaceChildren(...cards);
  $("#no-pending").hidden = cards.length > 0;
  $("#pending-count").textContent = waiting;
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
