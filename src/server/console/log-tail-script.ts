// The live tail of the Logs page, served as /assets/log-tail.js (script-src 'self'). It polls the
// page's feed (same origin, the page's own session cookie) and prepends new rows, built with DOM
// calls and textContent only: a record's text can never become markup. Without it the page works
// the same, with a Refresh link.

export const LOG_TAIL_SCRIPT = `(function () {
  "use strict";
  var status = document.getElementById("live-status");
  if (!status || !status.dataset.feed || !window.fetch) return;
  var feed = status.dataset.feed;
  var after = Number(status.dataset.after || "0");
  var failures = 0;
  var MAX_ROWS = 200;
  status.textContent = "Live: new requests appear at the top.";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function cell(label, child, cls) {
    var td = el("td", cls);
    td.setAttribute("data-label", label);
    var span = el("span", "cell");
    span.appendChild(child);
    td.appendChild(span);
    return td;
  }
  function muted(text) { return el("span", "muted", text); }
  function row(r) {
    var tr = document.createElement("tr");
    var time = el("time", "", r.time_text);
    time.setAttribute("datetime", r.time);
    tr.appendChild(cell("Time", time));
    var who = document.createDocumentFragment();
    who.appendChild(document.createTextNode(r.who + " "));
    who.appendChild(el("span", "muted small", r.who_kind === "user" ? "person" : r.who_kind === "agent" ? "agent" : ""));
    if (r.workload) {
      var line = el("div", "muted small", "workload ");
      if (r.workload_issuer) line.setAttribute("title", r.workload_issuer);
      line.appendChild(el("code", "name", r.workload));
      who.appendChild(line);
    }
    tr.appendChild(cell("Who", who));
    var request = document.createDocumentFragment();
    request.appendChild(el("code", "name", r.request));
    request.appendChild(document.createTextNode(" "));
    request.appendChild(el("span", "muted small", r.via));
    tr.appendChild(cell("Request", request));
    var outcome = document.createDocumentFragment();
    outcome.appendChild(el("span", "badge badge-" + r.status_tone, String(r.status)));
    if (r.would_refuse) {
      outcome.appendChild(document.createTextNode(" "));
      outcome.appendChild(el("span", "badge badge-warning", "would be refused"));
    }
    if (r.error) outcome.appendChild(el("span", "small", " " + r.error));
    tr.appendChild(cell("Status", outcome));
    tr.appendChild(cell("Took", document.createTextNode(r.duration_ms + " ms"), "num"));
    var credential = document.createDocumentFragment();
    credential.appendChild(r.keys ? el("code", "name", r.keys) : muted("none"));
    if (r.refs) credential.appendChild(el("span", "muted small", " " + r.refs));
    tr.appendChild(cell("Credential", credential));
    return tr;
  }
  function schedule(ms) { window.setTimeout(poll, ms); }
  function show(rows) {
    var body = document.querySelector("#logs tbody");
    if (!body) { window.location.reload(); return; } // the empty state: let the server draw the table
    for (var i = 0; i < rows.length; i++) body.insertBefore(row(rows[i]), body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
    status.textContent = "Live: " + rows.length + (rows.length === 1 ? " new request" : " new requests") + " at the top.";
  }
  function poll() {
    var url = feed + (feed.indexOf("?") < 0 ? "?" : "&") + "after=" + after;
    window.fetch(url, { credentials: "same-origin", cache: "no-store", redirect: "error" })
      .then(function (res) { if (!res.ok) throw new Error("status " + res.status); return res.json(); })
      .then(function (data) {
        failures = 0;
        var rows = (data && data.logs) || [];
        if (rows.length) {
          after = rows[rows.length - 1].id;
          show(rows);
        }
        schedule(document.hidden ? 10000 : 3000);
      })
      .catch(function () {
        failures += 1;
        status.textContent = "Live updates paused: the broker did not answer (is your session still signed in?). Refresh the page to see new requests.";
        if (failures < 5) schedule(10000);
      });
  }
  schedule(3000);
})();
`;
