// toolwire dashboard: live rows over server-sent events, and a confirm
// step on forms that ask for one. No framework; no inline script (the
// page's Content-Security-Policy allows none).
(function () {
  "use strict";

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // The calls page: rows the server pushes replace their old version or
  // are prepended, keeping at most data-limit rows.
  function liveRows(tbody) {
    var src = new EventSource(tbody.getAttribute("data-live"));
    var limit = parseInt(tbody.getAttribute("data-limit"), 10) || 50;
    src.addEventListener("call", function (ev) {
      var tmp = document.createElement("tbody");
      tmp.innerHTML = ev.data; // server-rendered, escaped by html/template
      var row = tmp.firstElementChild;
      if (!row) return;
      var empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();
      var old = tbody.querySelector('tr[data-call-id="' + row.getAttribute("data-call-id") + '"]');
      row.classList.add("flash");
      if (old) { old.replaceWith(row); } else { tbody.insertBefore(row, tbody.firstChild); }
      while (tbody.rows.length > limit) tbody.deleteRow(tbody.rows.length - 1);
    });
  }

  // One call's page: reload when the call changes (it finished).
  function watchCall(el) {
    var src = new EventSource(el.getAttribute("data-watch"));
    src.addEventListener("call", function () { src.close(); window.location.reload(); });
    // A form sent from the page navigates: no reload may race it.
    document.addEventListener("submit", function (ev) { if (!ev.defaultPrevented) src.close(); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var tbody = document.querySelector("tbody[data-live]");
    if (tbody && window.EventSource) liveRows(tbody);
    var call = document.querySelector("[data-watch]");
    if (call && window.EventSource) watchCall(call);
  });
})();
