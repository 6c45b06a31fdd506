// instore sandbox console: its two streams and the lists they keep. The
// console's own stream (/console/events) brings the virtual devices'
// screens; the merchant's event stream (GET /in-store/api/v1/events, read
// with fetch, resumed with Last-Event-ID) and the Online API's lists bring
// every resource. Loaded before app.js, whose globals (state, API, $,
// headers, the render functions) these use when called.

// readSSE reads a fetch response as server-sent events and calls
// onMessages with the messages ({id, event, data}; data null for a message
// without data) of each chunk, waiting for it before reading on. It ends
// when the stream ends and throws when it breaks.
async function readSSE(resp, onMessages) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf = (buf + decoder.decode(value, { stream: true })).replace(/\r\n/g, "\n");
      const msgs = [];
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        msgs.push(parseSSE(buf.slice(0, i)));
        buf = buf.slice(i + 2);
      }
      await onMessages(msgs);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// parseSSE parses one message (its lines, without the blank line ending it).
function parseSSE(block) {
  const m = { id: null, event: "message", data: null };
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue; // a comment (": ping")
    const c = line.indexOf(":");
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? "" : line.slice(c + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") m.event = value;
    else if (field === "id") m.id = value;
  }
  if (data.length) m.data = data.join("\n");
  return m;
}

// followConsole follows the virtual devices (/console/events): a snapshot,
// then every change; after a break, a new snapshot.
async function followConsole(gen, signal) {
  let retry = 500;
  while (gen === state.gen) {
    let resp = null;
    try { resp = await fetch("/console/events", { headers: headers(), cache: "no-store", signal }); } catch (e) { /* a break */ }
    if (gen !== state.gen) return;
    if (resp && (resp.status === 401 || resp.status === 403)) return refused(resp.status);
    if (resp && resp.ok && resp.body) {
      $("#login").hidden = true;
      $("#app").hidden = false;
      setUp("console", true);
      try {
        await readSSE(resp, (msgs) => { retry = 500; msgs.forEach(consoleMessage); });
      } catch (e) { /* a break */ }
    }
    if (gen !== state.gen) return;
    setUp("console", false);
    await sleep(retry);
    retry = Math.min(retry * 2, 8000);
  }
}

function consoleMessage(m) {
  if (!m.data) return;
  const v = JSON.parse(m.data);
  switch (m.event) {
    case "snapshot":
      state.digits = v.currencyDigits || {};
      state.devices = new Map(v.devices.map((d) => [d.serialNumber, d]));
      renderDevices(); renderTxs();
      break;
    case "device": if (keepDevice(v)) renderDevices(); break;
  }
}

// followAPI follows the merchant's events. The first connection starts
// live; once its first bytes have arrived (the server has fixed where it
// starts) the page reads the lists, then applies the events, so that none
// falls between the two. After a break it reconnects with Last-Event-ID:
// the server replays what the page missed, once. Had no event arrived
// yet, it starts over the same way (stream, then lists).
async function followAPI(gen, signal) {
  let retry = 500;
  while (gen === state.gen) {
    const resume = state.lastEventId;
    const h = { ...headers(), "Accept": "text/event-stream" };
    if (resume) h["Last-Event-ID"] = resume;
    let resp = null;
    try { resp = await fetch(`${API}/events`, { headers: h, cache: "no-store", signal }); } catch (e) { /* a break */ }
    if (gen !== state.gen) return;
    if (resp && (resp.status === 401 || resp.status === 403)) return refused(resp.status);
    if (resp && resp.status === 400 && resume) {
      state.lastEventId = ""; // a cursor no longer kept: start over from the lists
      continue;
    }
    if (resp && resp.ok && resp.body) {
      setUp("api", true);
      let loaded = !!resume;
      try {
        await readSSE(resp, async (msgs) => {
          if (!loaded) {
            await loadLists(signal);
            loaded = true;
          }
          retry = 500;
          for (const m of msgs) if (m.data && gen === state.gen) apiEvent(m);
        });
      } catch (e) { /* a break, or the lists could not be read */ }
    }
    if (gen !== state.gen) return;
    setUp("api", false);
    await sleep(retry);
    retry = Math.min(retry * 2, 8000);
  }
}

// api reads an Online API resource as JSON with the page's credentials.
async function api(path, opts = {}) {
  const resp = await fetch(API + path, {
    cache: "no-store", ...opts,
    headers: { ...headers(), "Accept": "application/json", ...(opts.headers || {}) },
  });
  if (!resp.ok) throw new Error(`${path}: ${resp.status}`);
  return resp.json();
}

// loadLists reads what the page shows from the Online API: the code lists
// (once), the last day's transactions, the pre-authorisations and their
// operations of the last 29 days (a pre-auth stays open for days; the
// listing covers at most 30, by the server's clock), the terminal IDs, the
// recent print jobs (the print.final events still kept) and the webhooks.
async function loadLists(signal) {
  const since = new Date(Date.now() - 29 * 86400e3).toISOString();
  const [meta, txs, preauths, terms, prints] = await Promise.all([
    state.meta || api("/metadata", { signal }),
    api("/transactions?limit=50", { signal }),
    api(`/transactions?type=PRE_AUTH,INCREMENT,CAPTURE,VOID&limit=100&from=${encodeURIComponent(since)}`, { signal }),
    api("/terminals", { signal }),
    recentPrints(signal),
    loadBatches(signal),
  ]);
  if (!state.meta) {
    state.meta = meta;
    renderMeta();
    renderDevices();
  }
  txs.transactions.forEach(keepTx);
  preauths.transactions.forEach(keepTx);
  state.terminals = new Map(terms.terminals.map((t) => [t.terminalId, t]));
  prints.forEach((p) => state.prints.set(p.printId, p));
  renderTxs(); renderTerminals(); renderPrints(); renderBatches();
  scheduleWebhooks(0);
}

// recentPrints reads the print jobs of the print.final events still kept,
// and returns the last 50.
async function recentPrints(signal) {
  let out = [];
  let after = "";
  for (let i = 0; i < 20; i++) {
    const page = await api(`/events?types=print.final&limit=500${after ? "&after=" + encodeURIComponent(after) : ""}`, { signal });
    out = out.concat(page.events.map((e) => e.data)).slice(-50);
    if (page.events.length < 500 || !page.nextCursor) break;
    after = page.nextCursor;
  }
  return out;
}

// apiEvent applies one event of the stream: its data is the resource as
// the API shows it after the change.
function apiEvent(m) {
  let ev;
  try { ev = JSON.parse(m.data); } catch (e) { return; }
  state.lastEventId = m.id || ev.id;
  state.feed.unshift(ev);
  if (state.feed.length > 30) state.feed.length = 30;
  renderFeed();
  const d = ev.data || {};
  const type = ev.type || "";
  if (type.startsWith("transaction.")) {
    if (keepTx(d)) {
      renderTxs(d.onlineAPIRefId);
      if (d.onlineAPIRefId === state.selected) showTimeline(d.onlineAPIRefId);
    }
  } else if (type.startsWith("print.")) {
    state.prints.set(d.printId, d);
    renderPrints();
  } else if (type.startsWith("terminal.")) {
    state.terminals.set(d.terminalId, d);
    renderTerminals();
  } else if (type === "batch.closed") {
    keepBatch(d);
    renderBatches(d.batchId);
  }
  scheduleWebhooks(1000);
}

// keepTx stores a transaction unless the page has a later version of it
// (the list read on load may be newer than an event that follows it).
function keepTx(t) {
  const cur = state.txs.get(t.onlineAPIRefId);
  if (cur && cur.version > t.version) return false;
  state.txs.set(t.onlineAPIRefId, t);
  return true;
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
