// Live updates: the page's <main> names its stream (data-live) and the version of what it shows
// (data-version); each "page" event carries new contents for <main>, rendered by the server exactly
// as the page itself was, with their version as the event id. Equal versions are not swapped in, so
// the page is only rebuilt when something changed.
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
    show("live", "ok");
    if (e.lastEventId && e.lastEventId === main.dataset.version) {
      return;
    }
    main.innerHTML = e.data;
    main.dataset.version = e.lastEventId;
    updates += 1;
    main.dataset.updates = String(updates);
  });
})();
