// denv ui: refresh a live page's <main> in place (no reload), every data-refresh-ms, by
// asking the same address for its content only. A page opened from a file (an export) is
// a snapshot: nothing to ask.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refreshMs || 0);
  if (!every || location.protocol === "file:") return;
  var main = document.getElementById("main");
  var busy = false;
  var last = null; // the content last asked for (the DOM's own serialisation differs)
  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(location.href, { headers: { "X-Denv-Fragment": "main" }, credentials: "same-origin" })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html !== null && html !== last) {
          last = html;
          var focused = document.activeElement && document.activeElement.id;
          main.innerHTML = html;
          if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
        }
      })
      .catch(function () { /* the server is away: try again at the next tick */ })
      .then(function () { busy = false; });
  }
  setInterval(refresh, every);
})();

// An export's results explorer has no server to ask: its selects (workload, rank) go to the
// page the export wrote for that view; the page gives the map (view -> file) in
// data-export-pages, keys 'WORKLOAD|RANK'.
(function () {
  "use strict";
  var form = document.querySelector("form[data-export-pages]");
  if (!form) return;
  var pages = JSON.parse(form.dataset.exportPages);
  function go() {
    var page = pages[form.elements.workload.value + "|" + form.elements.rank.value];
    if (page) location.href = page;
  }
  form.addEventListener("change", go);
  form.addEventListener("submit", function (event) { event.preventDefault(); go(); });
})();
