// tasks.js keeps the Tasks page current without a reload and, when the
// reviewer asks for it, says when a task needs them. It listens to every
// task's lifecycle events (GET /api/events, server-sent) and, when one
// arrives, fetches the page again and swaps in its [data-live] region (the
// filters and the table) and its title, which counts the tasks that need
// the reviewer: "(2) Tasks · project · lazy".
//
// "Notify me" is opt-in: nothing is asked of the browser before the click.
// After it (and the browser's permission), a task that becomes blocked or
// conflicted, fails, or trips a wire shows a notification that opens its
// review page. The choice is kept for this dashboard in localStorage; while
// it is on the page keeps listening in a background tab, else a hidden tab
// lets its connection go (a browser allows six per host) and catches up
// when shown. Where the stream is not served it polls every 5 s, without
// notifications. The server renders everything: this script only moves
// its HTML, and a notification says only the task's ref and what happened.
(function () {
  'use strict';
  var timer = null, busy = false, again = false, poller = null, source = null;
  var key = 'lazy-notify:' + location.host;
  var box = document.getElementById('notify-me');
  var button = document.getElementById('notify-button');
  var state = document.getElementById('notify-state');

  function notifying() {
    return !!window.Notification && Notification.permission === 'granted' && localStorage.getItem(key) === '1';
  }

  function showChoice() {
    if (!box || !window.Notification) { return; }
    box.hidden = false;
    if (Notification.permission === 'denied') {
      button.disabled = true;
      state.textContent = 'notifications are blocked for this site in the browser settings';
    } else if (notifying()) {
      button.textContent = 'Stop notifying';
      state.textContent = 'on: a notification when a task needs you, fails or trips a wire';
    } else {
      button.textContent = 'Notify me';
      state.textContent = 'a browser notification when a task needs you, fails or trips a wire, while this page is open';
    }
  }

  if (button) {
    button.addEventListener('click', function () {
      if (notifying()) {
        localStorage.removeItem(key);
        showChoice();
        return;
      }
      Notification.requestPermission().then(function (p) {
        if (p === 'granted') { localStorage.setItem(key, '1'); }
        showChoice();
      });
    });
  }

  // what an event says the reviewer should hear of, if anything
  function noticeOf(ev) {
    if (ev.kind === 'tripwire') { return 'tripped a wire: its grant was revoked'; }
    if (ev.kind !== 'status') { return ''; }
    switch (ev.status) {
      case 'blocked': return 'needs you: blocked, waiting for review';
      case 'conflict': return 'needs you: the sync hit conflicts';
      case 'failed': return 'failed: a turn could not run or crashed';
    }
    return '';
  }

  function notify(ev) {
    var words = noticeOf(ev);
    if (!words || !notifying() || !ev.task_id) { return; }
    var n = new Notification('lazy: ' + (ev.task_ref || 'a task') + ' ' + words, {
      body: 'Open its review page.',
      tag: ev.task_id + ':' + ev.kind + ':' + (ev.status || '')
    });
    n.onclick = function () {
      window.focus();
      location.href = '/review/' + encodeURIComponent(ev.task_id);
    };
  }

  function schedule() {
    if (timer) { return; }
    timer = setTimeout(function () { timer = null; refresh(); }, 150);
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.pathname + location.search, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'text/html' } })
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
      if (fresh) { el.replaceWith(document.adoptNode(fresh)); }
    });
    document.title = doc.title;
  }

  function stop() {
    if (source) { source.close(); source = null; }
    if (poller) { clearInterval(poller); poller = null; }
  }

  function poll() {
    if (!poller) { poller = setInterval(refresh, 5000); }
  }

  function listen() {
    if (source || poller) { return; }
    if (!window.EventSource) { poll(); return; }
    source = new EventSource('/api/events');
    // on every (re)connection: catch up with what happened while not listening
    source.onopen = schedule;
    source.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.kind === 'daemon_stopped') { source.close(); source = null; poll(); return; }
      notify(ev);
      schedule();
    };
    source.onerror = function () {
      // a stream refused outright (not served, logged out) is closed for good
      if (source && source.readyState === EventSource.CLOSED) { source = null; poll(); }
    };
  }

  document.addEventListener('visibilitychange', function () {
    if (document.hidden && !notifying()) { stop(); } else if (!document.hidden) { listen(); }
  });
  showChoice();
  if (!document.hidden || notifying()) { listen(); }
})();
