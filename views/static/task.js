// task.js keeps a live task's page current without a reload: it listens to
// the task's events (GET /api/tasks/:task/events, server-sent) and, when one
// arrives, fetches the page again and swaps in its [data-live] regions (the
// status, the current turn, commits, turns, messages). The forms are not in
// those regions, so what the reviewer is typing stays. Where the stream is
// not served (the dev server) or drops for good, it polls every 5 s. The
// server renders everything: this script only moves its HTML, except the
// running turn's transcript, which it extends from each `transcript` event
// (as text: never as HTML) rather than fetching the page for every piece.
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

  // transcript adds a part to its turn's transcript; a part the page lacks
  // the place for, or one that follows a gap, makes it fetch the page
  function transcript(p) {
    if (!p) { return; }
    var box = document.getElementById('turn-' + p.turn + '-transcript');
    if (!box) { schedule(); return; }
    var seq = parseInt(box.dataset.seq || '0', 10);
    if (p.seq <= seq) { return; }
    if (p.seq > seq + 1) { schedule(); return; }
    box.dataset.seq = String(p.seq);
    if (p.truncated) {
      var note = document.createElement('p');
      note.className = 'hint truncated';
      note.textContent = 'The transcript stops here: a turn keeps at most 64 KiB of it.';
      box.appendChild(note);
      return;
    }
    var calls = box.querySelector('.calls');
    var call = calls.querySelector('[data-call="' + p.call + '"]');
    if (!call) {
      call = document.createElement('div');
      call.className = 'call';
      call.dataset.call = String(p.call);
      var pre = document.createElement('pre');
      pre.className = 'call-text';
      call.appendChild(pre);
      calls.appendChild(call);
    }
    if (p.text) { call.querySelector('.call-text').textContent += p.text; }
    if (p.tool) {
      var t = document.createElement('div');
      t.className = 'tool';
      var name = document.createElement('code');
      name.className = 'tool-name';
      name.textContent = p.tool.name;
      var input = document.createElement('code');
      input.className = 'tool-input';
      input.textContent = p.tool.input || '';
      t.appendChild(name);
      t.appendChild(document.createTextNode(' '));
      t.appendChild(input);
      call.appendChild(t);
      if (p.tool.file) {
        var f = document.createElement('code');
        f.className = 'file';
        f.textContent = p.tool.file;
        box.querySelector('.files').appendChild(f);
      }
    }
    if (p.result) {
      var r = document.createElement('div');
      r.className = p.result.is_error ? 'tool-result tool-error' : 'tool-result';
      var rn = document.createElement('code');
      rn.className = 'tool-name';
      rn.textContent = p.result.tool;
      var out = document.createElement('pre');
      out.className = 'tool-output';
      out.textContent = p.result.content || '';
      r.appendChild(rn);
      r.appendChild(document.createTextNode(p.result.is_error ? ' failed' : ' returned'));
      r.appendChild(out);
      call.appendChild(r);
    }
    if (p.wrote) {
      var w = box.querySelector('.written');
      var wf = document.createElement('code');
      wf.className = 'file';
      wf.textContent = p.wrote;
      w.querySelector('.written-files').appendChild(document.createTextNode(' '));
      w.querySelector('.written-files').appendChild(wf);
      w.hidden = false;
    }
    if (p.tokens) { box.querySelector('.tokens').textContent = String(p.tokens); }
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
      if (ev.kind === 'transcript') { transcript(ev.transcript); return; }
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
