// task.js keeps a live task's page current without a reload: it listens to
// the task's events (GET /api/tasks/:task/events, server-sent) and, when one
// arrives, fetches the page again and swaps in its [data-live] regions (the
// status, the current turn, commits, turns, messages). The forms are not in
// those regions, so what the reviewer is typing stays. Where the stream is
// not served (the dev server) or drops for good, it polls every 5 s. The
// server renders everything: this script only moves its HTML.
(function () {
  'use strict';
  var body = document.body;
  var id = body.dataset.task;
  if (!id || body.dataset.ended) { return; }

  var timer = null, busy = false, again = false, poller = null, source = null;

  function schedule() {
    if (timer) { return; }
    timer = setTimeout(function () { timer = null; refresh(); }, 150);
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.pathname, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'text/html' } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) { swap(new DOMParser().parseFromString(html, 'text/html')); } })
      .catch(function () { /* the daemon is away: the next event or poll tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(); }
      });
  }

  function swap(doc) {
    document.querySelectorAll('[data-live]').forEach(function (el) {
      var fresh = el.id && doc.getElementById(el.id);
      if (!fresh) { return; }
      // disclosures the reviewer opened stay open
      el.querySelectorAll('details[open][id]').forEach(function (d) {
        var f = fresh.querySelector('#' + CSS.escape(d.id));
        if (f) { f.open = true; }
      });
      el.replaceWith(document.adoptNode(fresh));
    });
    document.title = doc.title;
    if (doc.body.dataset.ended) {
      // the task ended: its forms go, and nothing will change any more
      var main = doc.querySelector('main');
      if (main) { document.querySelector('main').replaceWith(document.adoptNode(main)); }
      body.dataset.ended = '1';
      stop();
    }
  }

  function stop() {
    if (source) { source.close(); source = null; }
    if (poller) { clearInterval(poller); poller = null; }
  }

  function poll() {
    if (!poller) { poller = setInterval(refresh, 5000); }
  }

  function listen() {
    if (source || poller || body.dataset.ended) { return; }
    if (!window.EventSource) { poll(); return; }
    source = new EventSource('/api/tasks/' + encodeURIComponent(id) + '/events');
    // on every (re)connection: catch up with what happened while not listening
    source.onopen = schedule;
    source.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.kind === 'net') { return; }
      if (ev.kind === 'daemon_stopped') { source.close(); source = null; poll(); return; }
      schedule();
    };
    source.onerror = function () {
      // a stream refused outright (not served, logged out) is closed for good
      if (source && source.readyState === EventSource.CLOSED) { source = null; poll(); }
    };
  }

  // a tab in the background holds no connection (a browser allows six per
  // host): it listens again, and catches up, when it is shown
  document.addEventListener('visibilitychange', function () {
    if (document.hidden) { stop(); } else { listen(); }
  });
  if (!document.hidden) { listen(); }
})();
