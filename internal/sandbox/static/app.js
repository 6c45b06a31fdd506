// instore sandbox console: follows the service through server-sent events
// (read with fetch so that the credentials travel in headers, never in a
// URL) and drives the virtual terminals through the console API.
"use strict";

const state = { key: "", token: "", meta: null, digits: {}, devices: new Map(), txs: new Map(), prints: new Map() };
const $ = (sel) => document.querySelector(sel);

function headers() {
  return { "Ocp-Apim-Subscription-Key": state.key, "Authorization": "Bearer " + state.token };
}

function setConn(text, cls) {
  const el = $("#conn");
  el.textContent = text;
  el.className = "conn " + (cls || "");
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

let retry = 500;
async function connect() {
  setConn("Connecting…");
  let resp;
  try {
    resp = await fetch("/console/events", { headers: headers(), cache: "no-store" });
  } catch (e) {
    return reconnect();
  }
  if (resp.status === 401 || resp.status === 403) {
    sessionStorage.clear();
    return showLogin(resp.status === 401 ? "Credentials refused" : "Merchant inactive");
  }
  if (!resp.ok || !resp.body) return reconnect();
  $("#login").hidden = true;
  $("#app").hidden = false;
  setConn("Live", "live");
  retry = 500;
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch (e) { break; }
    if (chunk.done) break;
    buf += decoder.decode(chunk.value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      handleEvent(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
  reconnect();
}

function reconnect() {
  setConn("Reconnecting…", "down");
  setTimeout(connect, retry);
  retry = Math.min(retry * 2, 8000);
}

function handleEvent(block) {
  let kind = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) kind = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const v = JSON.parse(data);
  switch (kind) {
    case "snapshot":
      state.meta = v.metadata;
      state.digits = v.currencyDigits || {};
      state.devices = new Map(v.devices.map((d) => [d.serialNumber, d]));
      state.txs = new Map(v.transactions.map((t) => [t.onlineAPIRefId, t]));
      state.prints = new Map((v.prints || []).map((p) => [p.printId, p]));
      renderMeta(); renderDevices(); renderTxs(); renderPrints();
      break;
    case "device": if (keepDevice(v)) renderDevices(); break;
    case "transaction":
      state.txs.set(v.onlineAPIRefId, v); renderTxs(v.onlineAPIRefId);
      if (v.onlineAPIRefId === state.selected) showTimeline(v.onlineAPIRefId);
      break;
    case "print": state.prints.set(v.printId, v); renderPrints(); break;
  }
}

// keepDevice stores a device's state unless the page already has a newer
// one: a click's answer can arrive after the event of a later change (the
// terminal showing APPROVED), and must not put the older screen back.
function keepDevice(d) {
  const cur = state.devices.get(d.serialNumber);
  if (cur && cur.version > d.version) return false;
  state.devices.set(d.serialNumber, d);
  return true;
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
    const nextEl = el.querySelector(".next");
    nextEl.textContent = next.join(" · ");
    nextEl.hidden = next.length === 0;
    el.querySelector(".interactive-box").checked = !!d.interactive;
    const toggle = el.querySelector(".toggle-online");
    toggle.dataset.action = d.online ? "offline" : "online";
    toggle.textContent = d.online ? "Take offline" : "Bring online";
    el.dataset.terminalId = d.terminalId || "";
  }
}

async function act(serial, action) {
  const resp = await fetch(`/console/devices/${encodeURIComponent(serial)}/${action}`, { method: "POST", headers: headers() });
  if (resp.ok) {
    if (keepDevice(await resp.json())) renderDevices();
  } else {
    const p = await resp.json().catch(() => ({}));
    setConn(p.detail || p.title || `Action failed (${resp.status})`, "down");
    setTimeout(() => setConn("Live", "live"), 3000);
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
  const rows = [...state.txs.values()].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  body.replaceChildren(...rows.slice(0, 200).map((t) => {
    const tr = document.createElement("tr");
    tr.dataset.ref = t.onlineAPIRefId;
    tr.className = (t.onlineAPIRefId === fresh ? "fresh " : "") + (t.onlineAPIRefId === state.selected ? "selected" : "");
    tr.tabIndex = 0;
    const bad = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].includes(t.statusId);
    tr.append(
      cell(time(t.createdAt)), cell(t.terminalId), cell(t.type), cell(money(t.amount, t.currency), "num"),
      cell(`${t.status} (${t.statusId})`, `status s${t.statusId}${bad ? " bad" : ""}`),
      cell(t.progress), cell(t.errorCode ? `${t.errorCode} (${t.errorId})` : ""), cell(t.onlineAPIRefId, "ref"));
    return tr;
  }));
  $("#tx-empty").hidden = rows.length > 0;
}

// The timeline of the transaction clicked last (state.selected), read from
// the Online API with the page's credentials, and read again when that
// transaction changes.
async function showTimeline(ref) {
  state.selected = ref;
  const resp = await fetch(`/in-store/api/v1/transaction/${encodeURIComponent(ref)}/events`, { headers: headers(), cache: "no-store" });
  if (state.selected !== ref) return; // another row was clicked meanwhile
  const list = $("#timeline-list");
  $("#timeline-ref").textContent = ref;
  $("#timeline").hidden = false;
  if (!resp.ok) {
    const li = document.createElement("li");
    li.textContent = `Could not read the timeline (${resp.status}).`;
    list.replaceChildren(li);
    return;
  }
  const { events } = await resp.json();
  list.replaceChildren(...events.map((e) => {
    const li = document.createElement("li");
    li.className = "event";
    const change = e.statusBefore && e.statusBefore !== e.statusAfter ? `${e.statusBefore} \u2192 ${e.statusAfter}` : e.statusAfter;
    li.append(cellText(time(e.at), "time"), cellText(e.actor, "actor"), cellText(e.kind, "kind"), cellText(change, "change"));
    if (e.detail) li.append(cellText(e.detail, "detail"));
    return li;
  }));
}

function cellText(text, cls) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
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
  const rows = [...state.prints.values()].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  body.replaceChildren(...rows.map((p) => {
    const tr = document.createElement("tr");
    tr.append(cell(time(p.createdAt)), cell(p.terminalId),
      cell(p.status ? `${p.status} (${p.statusId})` : "PRINTING", `status${p.statusId ? " bad" : " s0"}`), cell(p.printId, "ref"));
    return tr;
  }));
  $("#print-empty").hidden = rows.length > 0;
}

function renderMeta() {
  const box = $("#metadata");
  box.replaceChildren();
  const names = { errorCodes: "Error codes", transactionStatuses: "Transaction statuses", paymentMethods: "Payment methods", printStatuses: "Print statuses" };
  for (const [k, title] of Object.entries(names)) {
    const wrap = document.createElement("div");
    const h = document.createElement("h3");
    h.textContent = `${title} (${k})`;
    const table = document.createElement("table");
    const head = document.createElement("tr");
    ["id", "code", "description"].forEach((c) => { const th = document.createElement("th"); th.scope = "col"; th.textContent = c; head.append(th); });
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

start();
