// Live updates: the page's <main> names its stream (data-live); each "page" event carries the new
// contents of <main>, rendered by the server exactly as the page itself was.
(function () {
  "use strict";
  var main = document.getElementById("live");
  var status = document.getElementById("status");
  if (!main || !main.dataset.live || !window.EventSource) {
    return;
  }
  function show(text, css) {
    if (status) {
      status.textContent = text;
      status.className = "status " + css;
    }
  }
  var updates = 0;
  var source = new EventSource(main.dataset.live);
  source.addEventListener("open", function () { show("live", "ok"); });
  source.addEventListener("error", function () { show("reconnecting", "bad"); });
  source.addEventListener("trouble", function (e) { show(e.data, "bad"); });
  source.addEventListener("page", function (e) {
    if (main.innerHTML !== e.data) {
      main.innerHTML = e.data;
    }
    updates += 1;
    main.dataset.updates = String(updates);
    show("live", "ok");
  });
})();
