// instore sandbox console. Everything that is an Online API resource comes
// from the Online API itself, with the page's credentials in headers (never
// in a URL): the lists on first load, then the merchant's event stream
// (GET /in-store/api/v1/events, server-sent events read with fetch, resumed
// with Last-Event-ID after a break), and the webhooks with their
// deliveries. The console's own stream (/console/events) brings only the
// virtual devices' screens and state; its API drives them.
"use strict";

const API = "/in-store/api/v1";

const state = {
  key: "", token: "", meta: null, digits: {},
  devices: new Map(), txs: new Map(), prints: new Map(), terminals: new Map(),
  feed: [],           // the last events of the API stream, newest first
  lastEventId: "",    // the id of the last event applied: the stream resumes after it
  up: { console: false, api: false },
  gen: 0,             // a new login starts a new generation; older loops stop
  abort: null,
};
const $ = (sel) => document.querySelector(sel);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function headers() {
  return { "Ocp-Apim-Subscription-Key": state.key, "Authorization": "Bearer " + state.token };
}

function setConn(text, cls) {
  const el = $("#conn");
  el.textContent = text;
  el.className = "conn " + (cls || "");
}

// showConn shows whether both streams are up.
function showConn() {
  if (state.up.console && state.up.api) setConn("Live", "live");
  else setConn("Reconnecting…", "down");
}

function setUp(which, up) {
  state.up[which] = up;
  showConn();
}

async function start() {
  state.key = sessionStorage.getItem("instore.key") || "";
  state.token = sessionStorage.getItem("instore.token") || "";
  if (!state.key || !state.token) {
    try {
      const d = await (await fetch("/console/defaults")).json();
      if (d.subscriptionKey && d.accessToken) { state.key = d.subscriptionKey; state.token = d.accessToken; }
    } catch (e) { /* no defaults */ }
  }
  if (!state.key || !state.token) { showLogin(); return; }
  connect();
}

function showLogin(message) {
  $("#app").hidden = true;
  $("#login").hidden = false;
  if (message) setConn(message, "down");
  $("#key").focus();
}

$("#login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.key = $("#key").value.trim();
  state.token = $("#token").value.trim();
  sessionStorage.setItem("instore.key", state.key);
  sessionStorage.setItem("instore.token", state.token);
  connect();
});

// connect follows both streams; a second call (a new login) stops the
// loops of the first.
function connect() {
  if (state.abort) state.abort.abort();
  state.abort = new AbortController();
  const gen = ++state.gen;
  state.up = { console: false, api: false };
  // Other credentials may be another merchant's: start from nothing.
  state.lastEventId = "";
  state.feed = [];
  state.txs.clear(); state.prints.clear(); state.terminals.clear();
  setConn("Connecting…");
  followConsole(gen, state.abort.signal);
  followAPI(gen, state.abort.signal);
}

// refused stops everything and asks for credentials again.
function refused(status) {
  state.gen++;
  if (state.abort) state.abort.abort();
  sessionStorage.clear();
  showLogin(status === 401 ? "Credentials refused" : "Merchant inactive");
}

// codeName names an id of a metadata code list: "TRANSACTION_DECLINED (11)".
function codeName(list, id) {
  const e = ((state.meta || {})[list] || []).find((x) => x.id === id);
  return e ? `${e.code} (${id})` : String(id);
}

const modelNames = { countertop: "Countertop", mobile: "Mobile", pinpad: "PIN pad" };

function renderDevices() {
  const box = $("#devices");
  const tpl = $("#device-tpl");
  const list = [...state.devices.values()];
  for (const d of list) {
    let el = box.querySelector(`[data-serial="${CSS.escape(d.serialNumber)}"]`);
    if (!el) {
      el = tpl.content.firstElementChild.cloneNode(true);
      el.dataset.serial = d.serialNumber;
      el.setAttribute("aria-label", `${modelNames[d.model] || d.model} terminal ${d.serialNumber}`);
      el.querySelectorAll("button[data-action]").forEach((b) => b.addEventListener("click", () => act(d.serialNumber, b.dataset.action)));
      el.querySelector(".interactive-box").addEventListener("change", (e) => act(d.serialNumber, e.target.checked ? "interactive-on" : "interactive-off"));
      box.appendChild(el);
    }
    el.querySelector(".model").textContent = modelNames[d.model] || d.model;
    const on = el.querySelector(".online");
    on.textContent = d.online ? "Online" : "Offline";
    on.className = "online " + (d.online ? "on" : "off");
    el.querySelector(".tid").textContent = d.terminalId ? `Terminal ${d.terminalId} · ${d.serialNumber}` : `Unlinked · ${d.serialNumber}`;
    el.querySelector(".screen").textContent = d.screen || "";
    const next = [];
    if (d.nextOutcome != null) next.push(`Next transaction: ${codeName("transactionStatuses", d.nextOutcome)}`);
    if (d.nextPrint != null) next.push(`Next print: ${codeName("printStatuses", d.nextPrint)}`);
    if (d.nextTip != null) next.push(`Next tip: ${d.nextTip}`);
    renderTip(el.querySelector(".tip"), d);
    const nextEl = el.querySelector(".next");
    nextEl.textContent = next.join(" · ");
    nextEl.hidden = next.length === 0;
    el.querySelector(".interactive-box").checked = !!d.interactive;
    const toggle = el.querySelector(".toggle-online");
    toggle.dataset.action = d.online ? "offline" : "online";
    toggle.textContent = d.online ? "Take offline" : "Bring online";
    renderNetwork(el, d);
    el.dataset.terminalId = d.terminalId || "";
  }
}

// renderNetwork shows a device's card network (store and forward): its
// switch, and while it is down or forwarding, the floor limit, the offline
// queue and the reports not yet confirmed.
function renderNetwork(el, d) {
  const n = d.cardNetwork || { online: true, queued: [], unconfirmed: [] };
  const sw = el.querySelector(".toggle-network");
  sw.dataset.action = n.online ? "card-network-down" : "card-network-up";
  sw.textContent = n.online ? "Card network down" : "Card network up";
  const nf = el.querySelector(".next-forward");
  nf.hidden = n.nextForwardDeclined || (n.online && n.queued.length === 0);
  const box = el.querySelector(".network");
  const parts = [];
  if (!n.online) parts.push(`Card network down · floor limit ${n.floorLimit} · queue ${n.queued.length}/${n.queueSize}`);
  else if (n.queued.length > 0) parts.push(`Queue ${n.queued.length}`);
  if (n.unconfirmed.length > 0) parts.push(`Forwarding ${n.unconfirmed.length}`);
  if (n.nextForwardDeclined) parts.push("Next forward: DECLINED");
  box.textContent = parts.join(" · ");
  box.hidden = parts.length === 0;
}

// flash shows a message in the status pill for a few seconds.
function flash(message) {
  setConn(message, "down");
  setTimeout(showConn, 3000);
}

// The outcome buttons: a click decides the transaction the screen shows
// waiting (it names it, so a second or late click is refused rather than
// kept for the next sale), or, when none waits, sets the next outcome.
const outcomeActions = new Set(["approve", "decline", "wrong-pin", "cardholder-abort", "cancel"]);

async function act(serial, action) {
  const d = state.devices.get(serial);
  const q = outcomeActions.has(action) && d && d.deciding ? `?onlineAPIRefId=${encodeURIComponent(d.deciding)}` : "";
  const resp = await fetch(`/console/devices/${encodeURIComponent(serial)}/${action}${q}`, { method: "POST", headers: headers() });
  if (resp.ok) {
    if (keepDevice(await resp.json())) renderDevices();
  } else {
    const p = await resp.json().catch(() => ({}));
    flash(p.detail || p.title || `Action failed (${resp.status})`);
  }
}

// money writes an amount in minor units with its currency's ISO 4217
// decimals, which the server sends in the snapshot (2 for a code it does
// not know). Integer arithmetic: no rounding through floating point.
function money(amount, cur) {
  const e = Object.hasOwn(state.digits, cur) ? state.digits[cur] : 2;
  const neg = amount < 0;
  let s = String(Math.abs(amount));
  if (e > 0) {
    s = s.padStart(e + 1, "0");
    s = `${s.slice(0, -e)}.${s.slice(-e)}`;
  }
  return `${cur} ${neg ? "-" : ""}${s}`;
}

function time(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : "";
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// codeCell is a cell for a code such as TERMINAL_MUST_UPDATE that may
// break after each underscore.
function codeCell(code) {
  const td = document.createElement("td");
  code.split("_").forEach((part, i, all) => {
    td.append(part + (i < all.length - 1 ? "_" : ""));
    if (i < all.length - 1) td.append(document.createElement("wbr"));
  });
  return td;
}

function renderTxs(fresh) {
  const body = $("#transactions tbody");
  const rows = [...state.txs.values()].sort(newestFirst);
  body.replaceChildren(...rows.slice(0, 200).map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.ref = t.onlineAPIRefId;
    tr.className = (t.onlineAPIRefId === fresh ? "fresh " : "") + (t.onlineAPIRefId === state.selected ? "selected" : "");
    tr.tabIndex = 0;
    const bad = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].includes(t.statusId);
    tr.append(
      cell(time(t.createdAt)), cell(t.terminalId), cell(t.type), cell(money(t.totalAmount ?? t.amount, t.currency) + (t.tipAmount ? ` (tip ${money(t.tipAmount, t.currency)})` : ""), "num"),
      cell(`${t.status} (${t.statusId})` + (t.forwarding ? ` · offline ${t.forwarding.state}` : ""),
        `status s${t.statusId}${bad || (t.forwarding && t.forwarding.state === "DECLINED") ? " bad" : ""}`),
      cell(t.progress), cell(t.errorCode ? `${t.errorCode} (${t.errorId})` : ""), cell(t.onlineAPIRefId, "ref"));
    return tr;
  }));
  $("#tx-empty").hidden = rows.length > 0;
  renderPreAuths(fresh);
}

const newestFirst = (a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0);

// renderPreAuths lists the pre-authorisations among the transactions the
// page holds (the same lists and event stream as the transactions): each
// PRE_AUTH with its status, its authorisation (state, authorized and
// captured amounts, expiresAt; none until approved) and the INCREMENT,
// CAPTURE and VOID transactions that name it (preAuthorization), oldest
// first. A change of the authorisation arrives as transaction.authorization,
// whose data is the pre-auth.
function renderPreAuths(fresh) {
  const ops = new Map();
  for (const t of state.txs.values()) {
    if (!t.preAuthorization) continue;
    if (!ops.has(t.preAuthorization)) ops.set(t.preAuthorization, []);
    ops.get(t.preAuthorization).push(t);
  }
  const rows = [...state.txs.values()].filter((t) => t.type === "PRE_AUTH").sort(newestFirst).slice(0, 100);
  $("#preauths tbody").replaceChildren(...rows.map((t) => {
    const a = t.authorization;
    const tr = document.createElement("tr");
    tr.dataset.ref = t.onlineAPIRefId;
    if (t.onlineAPIRefId === fresh || (ops.get(t.onlineAPIRefId) || []).some((o) => o.onlineAPIRefId === fresh)) tr.className = "fresh";
    const list = el("ol", null, "ops");
    for (const o of (ops.get(t.onlineAPIRefId) || []).sort(newestFirst).reverse()) {
      const li = el("li", null, "op");
      li.dataset.ref = o.onlineAPIRefId;
      li.dataset.type = o.type;
      li.append(el("span", o.type, "type"), el("span", money(o.totalAmount ?? o.amount, o.currency), "amount"),
        el("span", `${o.status} (${o.statusId})`, `status s${o.statusId}${o.statusId > 0 && o.statusId < 14 ? " bad" : ""}`));
      list.append(li);
    }
    const opsCell = el("td");
    opsCell.append(list);
    tr.append(cell(time(t.createdAt)), cell(t.terminalId), cell(`${t.status} (${t.statusId})`, "status"),
      cell(a ? a.state : "", "auth" + (a ? " auth-" + a.state.toLowerCase() : "")),
      cell(a ? money(a.authorizedAmount, t.currency) : "", "num authorized"), cell(a ? money(a.capturedAmount, t.currency) : "", "num captured"),
      cell(a ? new Date(a.expiresAt).toLocaleString() : "", "expires"), opsCell, cell(t.onlineAPIRefId, "ref"));
    return tr;
  }));
  $("#pa-empty").hidden = rows.length > 0;
}

// The timeline of the transaction clicked last (state.selected), read from
// the Online API with the page's credentials, and read again when that
// transaction changes.
async function showTimeline(ref) {
  state.selected = ref;
  const resp = await fetch(`${API}/transaction/${encodeURIComponent(ref)}/events`, { headers: headers(), cache: "no-store" });
  if (state.selected !== ref) return; // another row was clicked meanwhile
  const list = $("#timeline-list");
  $("#timeline-ref").textContent = ref;
  $("#timeline").hidden = false;
  if (!resp.ok) {
    list.replaceChildren(el("li", `Could not read the timeline (${resp.status}).`));
    return;
  }
  const { events } = await resp.json();
  list.replaceChildren(...events.map((e) => {
    const li = el("li", null, "event");
    const change = e.statusBefore && e.statusBefore !== e.statusAfter ? `${e.statusBefore} \u2192 ${e.statusAfter}` : e.statusAfter;
    li.append(el("span", time(e.at), "time"), el("span", e.actor, "actor"), el("span", e.kind, "kind"), el("span", change, "change"));
    if (e.detail) li.append(el("span", e.detail, "detail"));
    return li;
  }));
}

$("#transactions tbody").addEventListener("keydown", (ev) => {
  const tr = ev.target.closest("tr[data-ref]");
  if (tr && ev.key === "Enter") showTimeline(tr.dataset.ref);
});
$("#transactions tbody").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr[data-ref]");
  if (tr) showTimeline(tr.dataset.ref);
});

function renderPrints() {
  const body = $("#prints tbody");
  const rows = [...state.prints.values()].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1)).slice(0, 50);
  body.replaceChildren(...rows.map((p) => {
    const tr = document.createElement("tr");
    tr.dataset.printId = p.printId;
    tr.append(cell(time(p.createdAt)), cell(p.terminalId),
      cell(p.status ? `${p.status} (${p.statusId})` : "PRINTING", `status${p.statusId ? " bad" : " s0"}`), cell(p.printId, "ref"));
    return tr;
  }));
  $("#print-empty").hidden = rows.length > 0;
}

function renderTerminals() {
  const body = $("#terminals tbody");
  const rows = [...state.terminals.values()].sort((a, b) => (a.terminalId < b.terminalId ? -1 : 1));
  body.replaceChildren(...rows.map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.terminalId = t.terminalId;
    tr.append(cell(t.terminalId),
      cell(t.linked ? `${t.serialNumber} (${modelNames[t.model] || t.model})` : "unlinked"),
      cell(t.linked ? (t.online ? "online" : "offline") : "", "state " + (t.online ? "on" : "off")),
      cell(t.busy ? `busy ${t.currentOnlineAPIRefId || ""}` : ""), cell(time(t.lastSeenAt)), closeCell(t));
    return tr;
  }));
  $("#terminals-empty").hidden = rows.length > 0;
}

// renderFeed lists the stream's last events, newest first.
function renderFeed() {
  $("#feed").replaceChildren(...state.feed.map((e) => {
    const li = el("li", null, "feed-event");
    li.dataset.eventId = e.id;
    const d = e.data || {};
    li.append(el("span", time(e.createdAt), "time"), el("span", e.type, "type"),
      el("span", d.onlineAPIRefId || d.printId || d.batchId || d.terminalId || "", "ref"), el("span", e.id, "id"));
    return li;
  }));
  $("#feed-empty").hidden = state.feed.length > 0;
}

function renderMeta() {
  const box = $("#metadata");
  box.replaceChildren();
  const names = { errorCodes: "Error codes", transactionStatuses: "Transaction statuses", paymentMethods: "Payment methods", printStatuses: "Print statuses" };
  for (const [k, title] of Object.entries(names)) {
    const wrap = document.createElement("div");
    const h = el("h3", `${title} (${k})`);
    const table = document.createElement("table");
    const head = document.createElement("tr");
    ["id", "code", "description"].forEach((c) => { const th = el("th", c); th.scope = "col"; head.append(th); });
    const thead = document.createElement("thead"); thead.append(head);
    const tbody = document.createElement("tbody");
    for (const e of state.meta[k]) {
      const tr = document.createElement("tr");
      tr.append(cell(String(e.id)), codeCell(e.code), cell(e.description));
      tbody.append(tr);
    }
    table.append(thead, tbody);
    wrap.append(h, table);
    box.append(wrap);
  }
}

// Webhooks: the endpoints (GET /webhooks) and each one's last deliveries
// with their attempts (GET /webhooks/{id}/deliveries). Read when the lists
// load, a second after events arrive (once for a burst of them) and on the
// Refresh button. While a delivery is pending its attempts come without an
// event, so the panel is read again when the first delivery of an
// endpoint's queue is due (the others wait behind it), at least 3 s apart,
// twice that after each read that changed nothing, at most 30 s apart.
const webhooks = { timer: 0, at: 0, running: false, again: false, last: "", quiet: 3000 };

function scheduleWebhooks(ms) {
  const at = Date.now() + ms;
  if (webhooks.timer) {
    if (webhooks.at <= at) return;
    clearTimeout(webhooks.timer);
  }
  webhooks.at = at;
  webhooks.timer = setTimeout(() => { webhooks.timer = 0; refreshWebhooks(); }, ms);
}

async function refreshWebhooks() {
  if (webhooks.running) { webhooks.again = true; return; }
  webhooks.running = true;
  let due = null;
  try {
    const { webhooks: list } = await api("/webhooks");
    const deliveries = await Promise.all(list.map((w) =>
      api(`/webhooks/${encodeURIComponent(w.webhookId)}/deliveries?limit=10`).catch(() => null)));
    const seen = JSON.stringify([list, deliveries]);
    webhooks.quiet = seen === webhooks.last ? Math.min(webhooks.quiet * 2, 30000) : 3000;
    webhooks.last = seen;
    renderWebhooks(list, deliveries);
    for (const page of deliveries) {
      // Newest first: the last pending one heads the endpoint's queue.
      const head = (page ? page.deliveries : []).filter((d) => d.status === "pending").pop();
      if (!head) continue;
      const t = head.nextAttemptAt ? Date.parse(head.nextAttemptAt) : Date.now();
      if (due === null || t < due) due = t;
    }
    $("#wh-error").hidden = true;
  } catch (e) {
    $("#wh-error").hidden = false;
  } finally {
    webhooks.running = false;
  }
  if (webhooks.again) {
    webhooks.again = false;
    scheduleWebhooks(1000);
  } else if (due !== null) {
    scheduleWebhooks(Math.min(Math.max(due - Date.now() + 500, webhooks.quiet), 30000));
  }
}

function renderWebhooks(list, deliveries) {
  $("#webhooks-list").replaceChildren(...list.map((w, i) => {
    const box = el("article", null, "webhook");
    box.dataset.webhookId = w.webhookId;
    const head = el("header");
    head.append(el("span", w.url, "url"), el("span", w.status, `wh-status ${w.status}`));
    box.append(head);
    const about = [w.eventTypes.length ? w.eventTypes.join(", ") : "all events", w.webhookId];
    if (w.description) about.unshift(w.description);
    box.append(el("p", about.join(" · "), "about"));
    if (w.disabledReason) box.append(el("p", `Disabled: ${w.disabledReason}`, "reason"));
    const page = deliveries[i];
    if (!page) {
      box.append(el("p", "Could not read its deliveries.", "empty"));
    } else if (page.deliveries.length === 0) {
      box.append(el("p", "No deliveries yet.", "empty"));
    } else {
      const wrap = el("div", null, "table-wrap");
      const table = el("table", null, "deliveries");
      const hr = el("tr");
      ["Created", "Event", "Status", "Attempts", ""].forEach((c) => { const th = el("th", c); th.scope = "col"; hr.append(th); });
      const thead = el("thead");
      thead.append(hr);
      const tbody = el("tbody");
      for (const d of page.deliveries) tbody.append(deliveryRow(w, d));
      table.append(thead, tbody);
      wrap.append(table);
      box.append(wrap);
    }
    return box;
  }));
  $("#wh-empty").hidden = list.length > 0;
}

function deliveryRow(w, d) {
  const tr = el("tr", null, "delivery");
  tr.dataset.deliveryId = d.deliveryId;
  tr.dataset.eventId = d.eventId;
  const ev = el("td");
  ev.append(el("span", d.eventType, "type"), el("span", d.eventId, "ref"));
  const st = el("td", null, `dstatus ${d.status}`);
  st.append(el("span", d.status));
  if (d.status === "pending" && d.nextAttemptAt) st.append(el("span", `next ${time(d.nextAttemptAt)}`, "sub"));
  const at = el("td");
  const ol = el("ol", null, "attempts");
  for (const a of d.attempts) {
    const li = el("li", null, "attempt" + (a.statusCode >= 200 && a.statusCode < 300 ? " ok" : " failed"));
    li.dataset.attempt = a.attempt;
    li.append(el("span", time(a.at), "time"), el("span", a.statusCode ? String(a.statusCode) : "no answer", "code"),
      el("span", `${a.durationMs} ms`, "dur"));
    if (a.error) li.append(el("span", a.error, "error"));
    if (a.response) li.append(el("span", a.response.length > 160 ? a.response.slice(0, 160) + "…" : a.response, "excerpt"));
    ol.append(li);
  }
  if (!d.attempts.length) ol.append(el("li", "not sent yet", "attempt none"));
  at.append(ol);
  const act = el("td");
  if (d.status !== "succeeded") {
    const b = el("button", "Retry now", "retry");
    b.type = "button";
    b.addEventListener("click", () => retryDelivery(w.webhookId, d.deliveryId));
    act.append(b);
  }
  tr.append(cell(time(d.createdAt)), ev, st, at, act);
  return tr;
}

async function retryDelivery(webhookId, deliveryId) {
  const resp = await fetch(`${API}/webhooks/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(deliveryId)}/retry`,
    { method: "POST", headers: headers() });
  if (!resp.ok) flash(`Retry failed (${resp.status})`);
  scheduleWebhooks(1000);
}

$("#wh-refresh").addEventListener("click", () => scheduleWebhooks(0));

start();
