// toolwire dashboard: live rows over server-sent events, live regions
// refreshed in place, a pause/resume control for both, a confirm step
// on forms that ask for one, and copy buttons. No framework; no inline script (the page's
// Content-Security-Policy allows none).
(function () {
  "use strict";

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // The page's live updates: paused and resumed together by every
  // [data-live-toggle] button on the page.
  var live = { paused: false, listeners: [] };
  function setPaused(p) {
    live.paused = p;
    document.querySelectorAll("[data-live-toggle]").forEach(function (b) {
      b.setAttribute("aria-pressed", p ? "true" : "false");
      b.textContent = p ? "Resume live updates" : "Pause live updates";
    });
    document.querySelectorAll("[data-live-state]").forEach(function (el) {
      el.textContent = p ? "paused" : "live";
      el.classList.toggle("paused", p);
    });
    live.listeners.forEach(function (f) { f(p); });
  }
  function onPause(f) { live.listeners.push(f); }

  // fetchPage reads the page at the current URL again, as a document.
  function fetchPage() {
    return fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (!res.ok) throw new Error("refresh: " + res.status);
        return res.text();
      })
      .then(function (html) { return new DOMParser().parseFromString(html, "text/html"); });
  }

  // The calls page: the server sends at most a few "calls" events a
  // second, each the newest version of every call updated since the last
  // (oldest first). Rows are applied once per animation frame: a row
  // replaces its old version or is put on top; at most data-limit rows are
  // kept. Paused, the stream is closed; resumed, it is opened again and
  // the rows are read afresh (catching up), with what arrives meanwhile
  // applied on top.
  var flashMax = 5;
  function liveRows(tbody) {
    var url = tbody.getAttribute("data-live");
    var limit = parseInt(tbody.getAttribute("data-limit"), 10) || 50;
    var pending = new Map(); // call id -> row, in order of arrival
    var scheduled = false, src = null, holding = false, resumes = 0;
    // Calls counted into "N matching" since the page was read: ids are
    // ULIDs, ordered by admission, so a call newer than the newest row
    // read is new (an update of an older call is not); each counted once.
    var newestRead = tbody.rows[0] ? tbody.rows[0].getAttribute("data-call-id") || "" : "";
    var counted = new Set();

    function queue(html) {
      var tmp = document.createElement("tbody");
      tmp.innerHTML = html; // server-rendered, escaped by html/template
      var row;
      while ((row = tmp.firstElementChild)) {
        tmp.removeChild(row);
        var id = row.getAttribute("data-call-id");
        pending.delete(id);
        pending.set(id, row);
      }
      while (pending.size > limit) pending.delete(pending.keys().next().value);
      if (!scheduled && !holding) { scheduled = true; window.requestAnimationFrame(apply); }
    }

    // The "N matching" count grows with the calls that arrived live (the
    // stream carries only calls the page's filter matches).
    function countNew(rows) {
      var m = document.querySelector("[data-matched]"), added = 0;
      for (var i = 0; m && i < rows.length; i++) {
        var id = rows[i].getAttribute("data-call-id") || "";
        if (id <= newestRead || counted.has(id)) continue;
        counted.add(id);
        added++;
      }
      if (counted.size > 20000) { // bounded: the newest counted becomes the mark
        newestRead = Array.from(counted).reduce(function (a, b) { return a > b ? a : b; }, newestRead);
        counted.clear();
      }
      if (!m || added === 0) return;
      var n = parseInt(m.getAttribute("data-matched"), 10) + added;
      m.setAttribute("data-matched", String(n));
      m.textContent = n >= 10000 ? "10,000+" : String(n);
    }

    function apply() {
      scheduled = false;
      if (live.paused || holding || pending.size === 0) return;
      var shown = new Map();
      for (var i = 0; i < tbody.rows.length; i++) shown.set(tbody.rows[i].getAttribute("data-call-id"), tbody.rows[i]);
      var empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();
      var top = document.createDocumentFragment();
      var fresh = Array.from(pending.values());
      pending.clear();
      // A few rows flash; a flood does not (an animation on every row
      // would keep the main thread painting).
      var flash = fresh.length <= flashMax;
      for (var j = fresh.length - 1; j >= 0; j--) { // newest first
        var row = fresh[j], old = shown.get(row.getAttribute("data-call-id"));
        if (flash) row.classList.add("flash");
        showTimes(row);
        if (!old) { top.appendChild(row); continue; }
        var focused = old.contains(document.activeElement);
        old.replaceWith(row);
        if (focused) { row.classList.add("kbd"); row.querySelector("a[href]").focus(); } // the keyboard's place is kept
      }
      countNew(top.childNodes);
      tbody.insertBefore(top, tbody.firstChild);
      while (tbody.rows.length > limit) tbody.deleteRow(tbody.rows.length - 1);
    }

    function open() {
      src = new EventSource(url);
      src.addEventListener("calls", function (ev) { queue(ev.data); });
      src.addEventListener("call", function (ev) { queue(ev.data); });
    }

    onPause(function (p) {
      if (p) {
        if (src) src.close();
        src = null;
        pending.clear();
        return;
      }
      holding = true; // what comes while the page is read waits for it
      open();
      // A read an earlier resume started and a later one overtook is
      // stale: it changes nothing (pause, resume, pause, resume quickly).
      var mine = ++resumes;
      fetchPage().then(function (doc) {
        var fresh = doc.querySelector("tbody#rows");
        if (fresh && mine === resumes && !live.paused) { tbody.innerHTML = fresh.innerHTML; showTimes(tbody); }
      }).catch(function () { /* the stream still catches up from now */ }).then(function () {
        if (mine !== resumes) return;
        holding = false;
        if (!scheduled) { scheduled = true; window.requestAnimationFrame(apply); }
      });
    });
    open();
  }

  // Live regions ([data-refresh] inside a [data-refresh-every] element):
  // every that many seconds, while the page is shown and not paused, the
  // page is read again and each region updated from its new version.
  // Children with data-key are merged by key: new ones added in the
  // server's order, gone ones removed, changed ones replaced — unless the
  // region says data-refresh="keep" (a card with a form being filled in
  // stays as it is) or holds the focus. Other regions are replaced whole
  // unless they hold the focus.
  function liveRegions(root) {
    var every = Math.max(1, parseInt(root.getAttribute("data-refresh-every"), 10) || 5) * 1000;
    var busy = false;
    function tick() {
      if (live.paused || busy || document.hidden) return;
      busy = true;
      fetchPage().then(function (doc) {
        if (live.paused) return;
        document.querySelectorAll("[data-refresh]").forEach(function (el) {
          var fresh = el.id && doc.getElementById(el.id);
          if (fresh) { update(el, fresh); showTimes(el); }
        });
      }).catch(function () { /* try again at the next tick */ }).then(function () { busy = false; });
    }
    setInterval(tick, every);
    onPause(function (p) { if (!p) tick(); });
  }

  function holdsFocus(el) { return el.contains(document.activeElement) && document.activeElement !== document.body; }

  function update(el, fresh) {
    var keyed = fresh.querySelector("[data-key]") || el.querySelector("[data-key]");
    if (!keyed) {
      if (!holdsFocus(el) && el.innerHTML !== fresh.innerHTML) el.innerHTML = fresh.innerHTML;
      return;
    }
    var keep = el.getAttribute("data-refresh") === "keep";
    var old = new Map();
    Array.from(el.children).forEach(function (c) { old.set(c.getAttribute("data-key"), c); });
    var want = Array.from(fresh.children);
    var wanted = new Set(want.map(function (c) { return c.getAttribute("data-key"); }));
    old.forEach(function (c, k) { if (!wanted.has(k) && !holdsFocus(c)) c.remove(); });
    var prev = null;
    want.forEach(function (c) {
      var k = c.getAttribute("data-key"), cur = old.get(k);
      var node = document.importNode(c, true);
      if (cur && cur.isConnected) {
        if (!keep && !holdsFocus(cur) && cur.outerHTML !== c.outerHTML) { cur.replaceWith(node); cur = node; }
      } else {
        cur = node;
        if (prev) { prev.after(cur); } else { el.insertBefore(cur, el.firstChild); }
      }
      prev = cur;
    });
  }

  // Times: every <time datetime> is shown in this browser's time zone,
  // or in UTC as the server wrote it when the viewer chose so (the header's
  // toggle; remembered in localStorage); [data-tz] labels name the zone.
  var tz = { utc: false };
  try { tz.utc = window.localStorage.getItem("toolwire.tz") === "utc"; } catch (e) { /* no storage: local */ }
  function pad(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
  function zoneName() {
    var off = -new Date().getTimezoneOffset(), sign = off < 0 ? "-" : "+";
    if (off === 0) return "UTC";
    off = Math.abs(off);
    return "UTC" + sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60);
  }
  function showTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (!el.hasAttribute("data-utc")) el.setAttribute("data-utc", el.textContent);
      if (tz.utc) { el.textContent = el.getAttribute("data-utc"); el.removeAttribute("title"); return; }
      var d = new Date(el.getAttribute("datetime").replace(/(\.\d{3})\d+/, "$1"));
      if (isNaN(d.getTime())) return;
      el.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" +
        pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
      el.title = el.getAttribute("data-utc") + " UTC";
    });
    root.querySelectorAll("[data-tz]").forEach(function (el) { el.textContent = tz.utc ? "UTC" : zoneName(); });
  }
  function setUTC(utc) {
    tz.utc = utc;
    try { window.localStorage.setItem("toolwire.tz", utc ? "utc" : "local"); } catch (e) { /* not remembered */ }
    document.querySelectorAll("[data-tz-toggle]").forEach(function (b) {
      b.textContent = utc ? "Times: UTC" : "Times: local (" + zoneName() + ")";
      b.setAttribute("aria-pressed", utc ? "true" : "false");
    });
    showTimes(document);
  }

  // Keyboard: "/" goes to the page's search, j and k to the next and
  // previous row of a table with links (Enter opens it), p pauses or
  // resumes live updates, Escape leaves a field. Keys typed in a field are
  // the field's.
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) {
      if (ev.key === "Escape") t.blur();
      return;
    }
    if (ev.key === "/") {
      var q = document.querySelector("input[type=search]");
      if (q) { ev.preventDefault(); q.focus(); q.select(); }
    } else if (ev.key === "j" || ev.key === "k") {
      ev.preventDefault();
      moveRow(ev.key === "j" ? 1 : -1);
    } else if (ev.key === "p" && document.querySelector("[data-live-toggle]")) {
      setPaused(!live.paused);
    }
  });
  function moveRow(d) {
    var rows = Array.from(document.querySelectorAll("table.grid tbody tr")).filter(function (r) { return r.querySelector("a[href]"); });
    if (rows.length === 0) return;
    var cur = rows.findIndex(function (r) { return r.contains(document.activeElement); });
    var i = cur < 0 ? (d > 0 ? 0 : rows.length - 1) : Math.max(0, Math.min(rows.length - 1, cur + d));
    rows.forEach(function (r) { r.classList.remove("kbd"); });
    rows[i].classList.add("kbd");
    rows[i].querySelector("a[href]").focus();
  }

  // One call's page: reload when the call changes (it finished).
  function watchCall(el) {
    var src = new EventSource(el.getAttribute("data-watch"));
    src.addEventListener("call", function () { src.close(); window.location.reload(); });
    // A form sent from the page navigates: no reload may race it.
    document.addEventListener("submit", function (ev) { if (!ev.defaultPrevented) src.close(); });
  }

  // Copy buttons (a call's page): [data-copy] holds the text to copy;
  // shown only where the browser has a clipboard. The result is said in
  // the page's [data-copy-status] (a live region).
  function copyButton(b) {
    if (!navigator.clipboard || !navigator.clipboard.writeText) return;
    b.hidden = false;
    b.addEventListener("click", function () {
      var status = document.querySelector("[data-copy-status]");
      var say = function (msg) { if (status) status.textContent = msg; };
      navigator.clipboard.writeText(b.getAttribute("data-copy")).then(
        function () { say("Copied " + b.getAttribute("data-copy-what") + "."); },
        function (e) { say("Copying failed: " + e.message); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-copy]").forEach(copyButton);
    document.querySelectorAll("[data-tz-toggle]").forEach(function (b) {
      b.hidden = false;
      b.addEventListener("click", function () { setUTC(!tz.utc); });
    });
    setUTC(tz.utc);
    var tbody = document.querySelector("tbody[data-live]");
    if (tbody && window.EventSource) liveRows(tbody);
    var regions = document.querySelector("[data-refresh-every]");
    if (regions && window.fetch && window.DOMParser) liveRegions(regions);
    var call = document.querySelector("[data-watch]");
    if (call && window.EventSource) watchCall(call);
    document.querySelectorAll("[data-live-toggle]").forEach(function (b) {
      b.hidden = false;
      b.addEventListener("click", function () { setPaused(!live.paused); });
    });
  });
})();
