// lazy review island. The page works fully without it: every form posts and
// the diff renders unified. With it: the toolbar (layout, long lines) with
// choices kept in localStorage, the split layout regrouped from the server's
// unified rows, inline comment forms posting JSON, the accept dialog, and a
// poll of the threads payload that refreshes threads and the status bar.
(function () {
  'use strict';

  const NARROW = '(max-width: 899px)';
  const body = document.body;
  const task = body.dataset.task || '';

  // choices live in localStorage; when storage is off or throws they still
  // last the page, from memory
  const mem = {};
  function pref(key, def) {
    if (key in mem) return mem[key];
    try { return window.localStorage.getItem(key) || def; } catch (e) { return def; }
  }
  function setPref(key, value) {
    mem[key] = value;
    try { window.localStorage.setItem(key, value); } catch (e) { /* storage off: memory keeps it */ }
  }

  // ---- the unified model and the split view ----
  // Every diff table keeps its unified tbodies as the model. Split shows
  // clones regrouped by pair, and detaches the model so ids stay unique.
  const tables = Array.from(document.querySelectorAll('[data-diff] table.diff-table'));
  const model = tables.map((t) => ({ table: t, bodies: Array.from(t.tBodies), split: null }));
  let layout = 'unified';

  function cell(tag, cls, colspan) {
    const c = document.createElement(tag);
    if (cls) c.className = cls;
    if (colspan) c.colSpan = colspan;
    return c;
  }

  // stripped copies a cell without its anchor, for the second pane of a context line
  function stripped(td) {
    const c = td.cloneNode(true);
    c.removeAttribute('id');
    delete c.dataset.file; delete c.dataset.side; delete c.dataset.line;
    c.querySelectorAll('.comment-link').forEach((a) => a.remove());
    return c;
  }

  function buildSplit(m) {
    const t = document.createElement('table');
    t.className = 'diff-table split-table';
    // fixed columns: the numbers as wide as the largest needs, the two
    // panes sharing the rest
    const cols = document.createElement('colgroup');
    let digits = 4;
    const widest = { old: 0, new: 0 };
    const tabs = parseInt(pref('lazy:difftabs', '4'), 10) || 4;
    for (let i = 0; i < 4; i++) cols.append(document.createElement('col'));
    cols.children[0].className = cols.children[2].className = 'c-num';
    t.append(cols);
    for (const tb of m.bodies) {
      const out = document.createElement('tbody');
      out.className = 'hunk';
      const pairs = new Map();
      const order = [];
      let lastPair = null;
      for (const row of Array.from(tb.rows)) {
        if (row.classList.contains('hunk-head')) {
          const tr = document.createElement('tr');
          tr.className = 'hunk-head';
          tr.append(cell('td', 'num'), cell('td', 'code', 3));
          tr.lastChild.textContent = row.cells[2].textContent;
          out.append(tr);
          continue;
        }
        if (row.classList.contains('ln')) {
          const key = row.dataset.rvPair;
          if (!pairs.has(key)) { pairs.set(key, { old: null, new: null, both: null, extra: [] }); order.push(key); }
          pairs.get(key)[row.dataset.rvPane] = row;
          lastPair = key;
        } else if (lastPair) {
          pairs.get(lastPair).extra.push(row); // thread and comment rows ride after their line's pair
        }
      }
      for (const key of order) {
        const p = pairs.get(key);
        const tr = document.createElement('tr');
        tr.dataset.rvPair = key;
        const left = p.both || p.old;
        const right = p.both || p.new;
        tr.className = 'ln ' + (p.both ? 'ln-ctx' : (left && right ? 'ln-mod' : (left ? 'ln-del' : 'ln-add')));
        if (left) widest.old = Math.max(widest.old, columns(left.cells[2], tabs));
        if (right) widest.new = Math.max(widest.new, columns(right.cells[2], tabs));
        for (const r of [left, right]) if (r) digits = Math.max(digits, r.cells[0].textContent.length, r.cells[1].textContent.length);
        if (left) {
          const num = left.cells[0].cloneNode(true);
          const code = p.both ? stripped(p.both.cells[2]) : left.cells[2].cloneNode(true);
          code.classList.add('pane-old');
          if (!p.both) { num.classList.add('del'); code.classList.add('del'); }
          tr.append(num, code);
        } else {
          tr.append(cell('td', 'num filler'), cell('td', 'code filler pane-old'));
        }
        if (right) {
          const num = right.cells[1].cloneNode(true);
          const code = right.cells[2].cloneNode(true);
          if (!p.both) { num.classList.add('add'); code.classList.add('add'); }
          tr.append(num, code);
        } else {
          tr.append(cell('td', 'num filler'), cell('td', 'code filler'));
        }
        out.append(tr);
        for (const extra of p.extra) {
          const x = extra.cloneNode(true);
          x.cells[0].colSpan = 4;
          out.append(x);
        }
      }
      t.append(out);
    }
    if (digits > 5) { cols.children[0].style.width = cols.children[2].style.width = 'calc(' + (digits + 1) + 'ch + 1rem)'; }
    t.append(paneBars(t, widest));
    return t;
  }

  // columns is how many character cells a code cell's line takes (a tab
  // counted at tabs columns), without laying it out
  function columns(td, tabs) {
    const text = td.querySelector('.text');
    const s = text ? text.textContent : td.textContent;
    let n = 0;
    for (let i = 0; i < s.length; i++) n += s.charCodeAt(i) === 9 ? tabs - (n % tabs) : 1;
    return n + 4; // the +/- sign and the cut note's margin
  }

  // paneBars is the split table's last row: one horizontal scroller per
  // pane, as wide as that pane's longest line, shifting all its lines
  function paneBars(t, widest) {
    const foot = document.createElement('tfoot');
    foot.className = 'pane-bars';
    const tr = document.createElement('tr');
    for (const side of ['old', 'new']) {
      const bar = document.createElement('div');
      bar.className = 'pane-bar pane-' + side;
      bar.setAttribute('aria-label', 'Scroll the ' + side + ' side sideways');
      const inner = document.createElement('div');
      inner.style.width = 'calc(' + widest[side] + 'ch + 1.5rem)';
      bar.append(inner);
      let queued = false;
      bar.addEventListener('scroll', () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; t.style.setProperty('--sx-' + side, bar.scrollLeft + 'px'); });
      }, { passive: true });
      const holder = cell('td', 'bar-cell');
      holder.append(bar);
      tr.append(cell('td', 'num'), holder);
    }
    foot.append(tr);
    // a sideways wheel or trackpad swipe over a pane moves that pane's scroller
    t.addEventListener('wheel', (e) => {
      if (Math.abs(e.deltaX) <= Math.abs(e.deltaY)) return;
      const code = e.target.closest && e.target.closest('tr.ln td.code');
      if (!code || !t.closest('.wrap-scroll')) return;
      const bar = foot.querySelector(code.classList.contains('pane-old') ? '.pane-old' : '.pane-new');
      const before = bar.scrollLeft;
      bar.scrollLeft += e.deltaX;
      if (bar.scrollLeft !== before) e.preventDefault();
    }, { passive: false });
    return foot;
  }

  // Split tables are built at once for the files in or near the view, and
  // for more in page order up to SPLIT_ROWS rows; the rest are built as
  // they come near the view (a 300-file change switches in a frame, not in
  // 300 tables' time). A file not yet built keeps its unified rows.
  const SPLIT_ROWS = 500;
  const splitLater = new Map(); // table -> its model, not built yet
  const nearView = 'IntersectionObserver' in window ? new IntersectionObserver((entries) => {
    for (const e of entries) {
      const m = e.isIntersecting && splitLater.get(e.target);
      if (m && layout === 'split') splitOne(m);
    }
  }, { rootMargin: '1500px 0px' }) : null;

  function splitOne(m) {
    if (splitLater.delete(m.table) && nearView) nearView.unobserve(m.table);
    m.bodies.forEach((b) => b.remove());
    m.split = buildSplit(m);
    m.table.after(m.split);
    hunkTabStops(m.split.parentNode);
    if (m.sx) { // rebuilt (a refresh of its threads): each pane stays where it was scrolled
      for (const side of ['old', 'new']) {
        if (!m.sx[side]) continue;
        m.split.querySelector('.pane-bar.pane-' + side).scrollLeft = m.sx[side];
        m.split.style.setProperty('--sx-' + side, m.sx[side] + 'px');
      }
      m.sx = null;
    }
  }

  function showLayout(next) {
    if (nearView) nearView.disconnect();
    splitLater.clear();
    // every rect and scroll offset is read before the first change: one
    // layout, not one a table
    const vh = window.innerHeight;
    const near = next === 'split' ? model.map((m) => {
      const r = (m.split || m.table).getBoundingClientRect();
      const bars = m.split ? m.split.querySelectorAll('.pane-bar') : [];
      m.sx = bars.length === 2 ? { old: bars[0].scrollLeft, new: bars[1].scrollLeft } : null;
      return r.height > 0 && r.bottom > -vh && r.top < 2 * vh;
    }) : [];
    let budget = SPLIT_ROWS;
    for (const m of model) {
      if (!m.split) continue; // its unified rows are in place
      m.split.remove();
      m.split = null;
      m.bodies.forEach((b) => m.table.append(b)); // back until split anew
    }
    if (next === 'split') {
      const order = model.map((m, i) => i).sort((a, b) => near[b] - near[a]); // near first, then page order
      for (const i of order) {
        const m = model[i];
        const rows = m.bodies.reduce((n, b) => n + b.rows.length, 0);
        if (!nearView || near[i] || rows <= budget) {
          budget -= rows;
          splitOne(m);
        } else {
          splitLater.set(m.table, m);
          nearView.observe(m.table);
        }
      }
    }
    document.querySelectorAll('[data-diff]').forEach((d) => {
      d.classList.toggle('layout-split', next === 'split');
      d.classList.toggle('layout-unified', next !== 'split');
    });
    layout = next;
  }

  // ---- toolbar ----
  const toolbar = document.querySelector('.toolbar');
  const narrow = window.matchMedia(NARROW);

  function applyModes(raise) {
    const wanted = pref('lazy:difflayout', 'unified');
    const next = narrow.matches ? 'unified' : wanted;
    const wrap = pref('lazy:diffwrap', 'scroll');
    const tabs = pref('lazy:difftabs', '4');
    document.querySelectorAll('[data-diff]').forEach((d) => {
      d.classList.toggle('wrap-wrap', wrap === 'wrap');
      d.classList.toggle('wrap-scroll', wrap !== 'wrap');
      // the stylesheet's default is 4: an inline custom property on the
      // diff would make the browser restyle every line of it
      if (tabs !== '4' || d.style.getPropertyValue('--tab-size')) d.style.setProperty('--tab-size', /^[0-9]+$/.test(tabs) ? tabs : '4');
    });
    const changed = next !== layout;
    if (changed) showLayout(next);
    if (toolbar) {
      toolbar.querySelectorAll('.mode').forEach((mode) => {
        const current = { 'lazy:difflayout': next, 'lazy:diffwrap': wrap, 'lazy:difftabs': tabs }[mode.dataset.mode];
        mode.querySelectorAll('button').forEach((b) => {
          b.setAttribute('aria-pressed', String(b.dataset.value === current));
          if (mode.dataset.mode === 'lazy:difflayout' && b.dataset.value === 'split') {
            b.disabled = narrow.matches;
            b.title = narrow.matches ? 'Split needs a window at least 900 px wide' : '';
          }
        });
      });
    }
    if (changed && raise) document.dispatchEvent(new CustomEvent('rv:layout', { detail: { layout: next } }));
  }

  if (toolbar && tables.length) {
    toolbar.hidden = false;
    toolbar.addEventListener('click', (e) => {
      const b = e.target.closest('button[data-value]');
      if (!b || b.disabled) return;
      setPref(b.closest('.mode').dataset.mode, b.dataset.value);
      applyModes(true);
    });
    narrow.addEventListener('change', () => applyModes(true));
    applyModes(false);
  }

  // ---- inline comment forms ----
  const tpl = document.querySelector('template.comment-form-tpl');

  function lineRow(td) { return td.closest('tr'); }

  function openForm(td) {
    const frag = td.id;
    const existing = document.querySelector('tr.comment-row[data-comment-for="' + CSS.escape(frag) + '"]');
    if (existing) { existing.querySelector('textarea').focus(); return; }
    const row = lineRow(td);
    let after = row;
    while (after.nextElementSibling && after.nextElementSibling.dataset.threadFor === frag) after = after.nextElementSibling;
    const tr = document.createElement('tr');
    tr.className = 'comment-row';
    tr.dataset.commentFor = frag;
    const c = cell('td', '', layout === 'split' ? 4 : 3);
    const form = tpl.content.firstElementChild.cloneNode(true);
    form.querySelector('[name=file]').value = td.dataset.file;
    form.querySelector('[name=line]').value = td.dataset.line;
    form.querySelector('[name=side]').value = td.dataset.side;
    const from = form.querySelector('[name=start_line]');
    if (from) { from.max = td.dataset.line; from.placeholder = td.dataset.line; }
    const warn = document.querySelector('.ask-warning');
    if (warn) form.prepend(warn.cloneNode(true));
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.textContent = 'Cancel';
    cancel.addEventListener('click', () => tr.remove());
    form.querySelector('.buttons').append(cancel);
    // Esc closes an empty form; one with text typed keeps it (and leaves it)
    form.addEventListener('keydown', (e) => {
      if (e.key !== 'Escape') return;
      const box = form.querySelector('textarea');
      if (box.value.trim()) box.blur(); else tr.remove();
      e.preventDefault();
    });
    c.append(form);
    tr.append(c);
    after.after(tr);
    form.querySelector('textarea').focus();
  }

  document.addEventListener('click', (e) => {
    const a = e.target.closest('a.comment-link');
    if (!a || !tpl) return;
    e.preventDefault();
    openForm(a.closest('td.code'));
  });

  // ---- message times: "5m ago" kept true while the page stays open (the
  // exact time is the element's title) ----
  function freshTimes() {
    const now = Date.now();
    document.querySelectorAll('time.msg-time[datetime]').forEach((el) => {
      const at = Date.parse(el.getAttribute('datetime'));
      if (isNaN(at)) return;
      const s = Math.max(0, Math.round((now - at) / 1000));
      el.textContent = s < 60 ? s + 's ago' : s < 3600 ? Math.floor(s / 60) + 'm ago' : s < 172800 ? Math.floor(s / 3600) + 'h ago' : el.getAttribute('datetime').slice(0, 10);
    });
  }
  setInterval(freshTimes, 30000);

  // ---- line numbers: permalinks, and ranges picked by drag or shift-click ----
  // A number is made a link (#l-<path>-<side>-<line>, the code cell's id)
  // when the pointer first reaches it: no bytes or tab stops for the
  // thousands of numbers of a large diff. A click goes to the line and
  // copies its address; a drag from one number to another on the same
  // file and side, or a shift-click after a click, opens the range
  // comment form (start_line filled in).
  function codeOfNum(td) {
    const next = td.nextElementSibling;
    if (next && next.matches('td.code[data-line]')) return next;
    const row = td.closest('tr');
    return row ? row.querySelector('td.code[data-line]') : null;
  }
  function lineLink(td) {
    if (td.querySelector('a.line-link') || !/^[0-9]+$/.test(td.textContent)) return;
    const code = codeOfNum(td);
    if (!code || !code.id) return;
    const a = document.createElement('a');
    a.className = 'line-link';
    a.href = '#' + code.id;
    a.tabIndex = -1; // the keys reach lines; a tab stop per number would bury the page's controls
    a.textContent = td.textContent;
    a.title = 'Link to this line (drag or shift-click to pick a range to comment on)';
    td.textContent = '';
    td.append(a);
  }
  document.addEventListener('mouseover', (e) => {
    const td = e.target.closest && e.target.closest('[data-diff] td.num');
    if (td) lineLink(td);
  });

  let pickFrom = null;   // the code cell a range starts at
  let picking = false;   // a drag is under way
  let pickMoved = false;
  let pickTo = null;
  function sameSide(a, b) { return a && b && a.dataset.file === b.dataset.file && a.dataset.side === b.dataset.side; }
  function clearPick() { document.querySelectorAll('td.range-pick').forEach((c) => c.classList.remove('range-pick')); }
  function showPick(a, b) {
    clearPick();
    const lo = Math.min(+a.dataset.line, +b.dataset.line), hi = Math.max(+a.dataset.line, +b.dataset.line);
    const table = b.closest('table');
    if (!table) return;
    table.querySelectorAll('td.code[data-line]').forEach((c) => {
      if (sameSide(c, b) && +c.dataset.line >= lo && +c.dataset.line <= hi) c.classList.add('range-pick');
    });
  }
  function openRangeForm(a, b) {
    if (!tpl || !b.querySelector('a.comment-link')) return;
    const first = +a.dataset.line <= +b.dataset.line ? a : b;
    const last = first === a ? b : a;
    openForm(last);
    const row = document.querySelector('tr.comment-row[data-comment-for="' + CSS.escape(last.id) + '"]');
    const from = row && row.querySelector('[name=start_line]');
    if (from && first !== last) from.value = first.dataset.line;
    showPick(first, last);
  }
  document.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    const td = e.target.closest && e.target.closest('[data-diff] td.num');
    const code = td && codeOfNum(td);
    if (!code) return;
    e.preventDefault(); // no text selection while picking lines
    if (e.shiftKey && pickFrom && document.contains(pickFrom) && sameSide(pickFrom, code)) {
      openRangeForm(pickFrom, code);
      pickFrom = null;
      return;
    }
    clearPick();
    pickFrom = pickTo = code;
    picking = true;
    pickMoved = false;
  });
  document.addEventListener('mouseover', (e) => {
    if (!picking) return;
    const td = e.target.closest && e.target.closest('[data-diff] td.num, [data-diff] td.code');
    const code = td && (td.matches('td.num') ? codeOfNum(td) : (td.dataset.line ? td : null));
    if (!code || !sameSide(pickFrom, code) || code === pickTo) return;
    pickTo = code;
    pickMoved = pickTo !== pickFrom;
    showPick(pickFrom, pickTo);
  });
  document.addEventListener('mouseup', () => {
    if (!picking) return;
    picking = false;
    if (pickMoved) { openRangeForm(pickFrom, pickTo); pickFrom = null; }
  });
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('tr.comment-row .buttons button[type=button]')) { clearPick(); return; }
    const a = e.target.closest && e.target.closest('a.line-link');
    if (!a || e.ctrlKey || e.metaKey || e.button !== 0) return;
    if (e.shiftKey) { e.preventDefault(); return; } // the end of a range, not a new window
    if (pickMoved) { e.preventDefault(); return; } // the end of a drag, not a click
    const url = location.href.split('#')[0] + a.getAttribute('href');
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(url).catch(() => {});
    // the hash changes as a link's would; the code cell is the target
  });

  document.addEventListener('submit', async (e) => {
    const form = e.target;
    if (form.classList.contains('accept-form')) {
      const actions = form.closest('.actions');
      const fb = actions && actions.querySelector('.unblock-form textarea');
      if (fb) form.querySelector('[name=draft_feedback]').value = fb.value;
      return;
    }
    if (!form.classList.contains('comment-form')) return;
    e.preventDefault();
    const data = new FormData(form);
    const payload = {
      body: data.get('body') || '',
      intent: (e.submitter && e.submitter.value) || 'comment',
    };
    if (data.get('thread_id')) {
      payload.thread_id = data.get('thread_id');
    } else {
      payload.file = data.get('file');
      payload.line = parseInt(data.get('line'), 10);
      payload.side = data.get('side');
      const start = parseInt(data.get('start_line') || '', 10);
      if (start > 0) payload.start_line = start;
    }
    let err = form.querySelector('.form-error');
    if (err) err.remove();
    try {
      const r = await fetch(form.action, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Lazy-CSRF': document.body.dataset.csrf || '' }, body: JSON.stringify(payload) });
      if (r.status === 201) {
        const row = form.closest('tr.comment-row');
        if (row) row.remove(); else form.reset();
        await refresh();
        poll(true);
        return;
      }
      const j = await r.json().catch(() => ({ error: 'the daemon answered ' + r.status }));
      throw new Error(j.error || ('the daemon answered ' + r.status));
    } catch (x) {
      err = document.createElement('p');
      err.className = 'form-error';
      err.textContent = x.message + ' — your text is kept; try again.';
      form.append(err);
    }
  });

  // ---- accept dialog ----
  document.querySelectorAll('.accept-block').forEach((block) => {
    const form = block.querySelector('.accept-form');
    const open = block.querySelector('.accept-open');
    if (!form || !open || typeof HTMLDialogElement === 'undefined') return;
    const dialog = document.createElement('dialog');
    dialog.className = 'accept-dialog';
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.textContent = 'Cancel';
    cancel.addEventListener('click', () => dialog.close());
    dialog.append(form);
    form.append(cancel);
    block.append(dialog);
    open.hidden = false;
    open.addEventListener('click', () => dialog.showModal());
  });

  // ---- the reviewer's state, kept by the daemon ----
  // Viewed files, resolved threads and the head last reviewed live on the
  // server (api.ReviewState), so another browser sees them. The page is
  // rendered with them and carries them in data-rv-state; this is the cache:
  // each change is posted with fetch and the answer (the whole state) is
  // taken, and the poll fetches it again (another tab or browser's marks).
  let reviewState = readReviewState();
  function readReviewState() {
    const el = document.querySelector('.review-head[data-rv-state]');
    if (!el) return null;
    try { return JSON.parse(el.dataset.rvState); } catch (e) { return null; }
  }
  const stateURL = (what) => '/api/review/' + encodeURIComponent(task) + '/' + what;
  // body's data-rv-pending counts the changes on their way (tests and a
  // reviewer's reload wait for 0)
  let statePending = 0;
  async function postReviewState(what, payload) {
    body.dataset.rvPending = String(++statePending);
    try {
      const r = await fetch(stateURL(what), {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Lazy-CSRF': body.dataset.csrf || '' },
        body: JSON.stringify(payload),
      });
      const j = await r.json().catch(() => ({ error: 'the daemon answered ' + r.status }));
      if (!r.ok) throw new Error(j.error || ('the daemon answered ' + r.status));
      adoptReviewState(j);
      return j;
    } finally {
      body.dataset.rvPending = String(--statePending);
    }
  }
  async function fetchReviewState() {
    if (!reviewState) return;
    try {
      const r = await fetch(stateURL('state'), { headers: { Accept: 'application/json' } });
      if (!r.ok) return;
      const j = await r.json();
      const mine = JSON.stringify([reviewState.viewed, reviewState.resolved]);
      if (JSON.stringify([j.viewed, j.resolved]) !== mine) adoptReviewState(j);
      else reviewState = j;
    } catch (e) { /* the daemon may be restarting: the next poll tries again */ }
  }
  function adoptReviewState(st) {
    const before = reviewState;
    reviewState = st;
    for (const f of files) {
      const was = before && before.viewed[f.dataset.path] === f.dataset.diffHash;
      showViewed(f);
      if (was !== isViewed(f)) f.open = !isViewed(f);
    }
    restoreThreads(document);
  }
  // reviewNotice says what a change did, for a moment, in the page's live region
  function reviewNotice(text, alert) {
    let p = document.querySelector('.rv-state-notice');
    if (!p) {
      p = document.createElement('p');
      p.className = 'rv-state-notice';
      p.setAttribute('role', 'status');
      const head = document.querySelector('.review-head');
      if (head) head.append(p); else return;
    }
    p.textContent = text;
    p.classList.toggle('alert', !!alert);
  }

  // ---- files: viewed marks, the current file, keyboard ----
  // A viewed mark is kept per reviewer, task and file with the hash of the
  // file's diff: when the diff changes, the mark no longer matches and is gone.
  const files = Array.from(document.querySelectorAll('[data-diff] details.file'));
  const navItems = new Map();
  document.querySelectorAll('.file-nav li[data-nav-file]').forEach((li) => navItems.set(li.dataset.navFile, li));
  const isViewed = (f) => !!reviewState && reviewState.viewed[f.dataset.path] === f.dataset.diffHash;

  function showViewed(f) {
    const on = isViewed(f);
    const box = f.querySelector('.viewed-box');
    if (box) box.checked = on;
    const li = navItems.get(f.dataset.path);
    if (li) { li.classList.toggle('viewed', on); li.querySelector('.viewed-mark').hidden = !on; }
  }
  // setViewed shows the mark at once and posts it; a refusal puts it back
  async function setViewed(f, on) {
    if (!reviewState) return;
    const path = f.dataset.path;
    const before = reviewState.viewed[path];
    if (on) reviewState.viewed[path] = f.dataset.diffHash; else delete reviewState.viewed[path];
    showViewed(f);
    f.open = !on;
    try {
      await postReviewState('viewed', { file: path, hash: f.dataset.diffHash, viewed: on });
    } catch (x) {
      if (before === undefined) delete reviewState.viewed[path]; else reviewState.viewed[path] = before;
      showViewed(f);
      reviewNotice('Not saved: ' + x.message, true);
    }
  }
  // moveLocalMarks sends the viewed marks an older page kept in this
  // browser to the daemon once, then forgets them
  async function moveLocalMarks() {
    for (const f of files) {
      const key = 'lazy:viewed:' + task + ':' + f.dataset.path;
      let had = '';
      try { had = window.localStorage.getItem(key) || ''; } catch (e) { return; }
      if (!had) continue;
      try {
        if (had === f.dataset.diffHash && !isViewed(f)) await setViewed(f, true);
        window.localStorage.removeItem(key);
      } catch (e) { return; }
    }
  }
  if (task && reviewState) {
    for (const f of files) {
      const toggle = f.querySelector('.viewed-toggle');
      const box = f.querySelector('.viewed-box');
      if (!toggle || !box) continue;
      toggle.hidden = false;
      if (isViewed(f)) f.open = false;
      showViewed(f);
      box.addEventListener('change', () => setViewed(f, box.checked));
    }
    moveLocalMarks();
  }

  let focusedFile = -1;
  let keyMoved = 0; // when a key last moved the focus: scrolling then follows it
  function markCurrent(i) {
    files.forEach((f, k) => f.classList.toggle('focused', k === i));
    navItems.forEach((li) => li.classList.remove('current'));
    const li = i >= 0 ? navItems.get(files[i].dataset.path) : null;
    if (li) { li.classList.add('current'); li.scrollIntoView({ block: 'nearest' }); }
  }
  function gotoFile(step) {
    if (!files.length) return;
    focusedFile = Math.max(0, Math.min(files.length - 1, focusedFile + step));
    keyMoved = Date.now();
    const f = files[focusedFile];
    if (!f.open && !isViewed(f)) f.open = true; // moving to a file is to read it
    markCurrent(focusedFile);
    f.scrollIntoView({ block: 'start' });
    const head = f.querySelector('summary');
    if (head) head.focus({ preventScroll: true });
  }
  // the file at the top of the window is the current one in the list
  if (files.length && 'IntersectionObserver' in window) {
    const seen = new Set();
    const io = new IntersectionObserver((entries) => {
      for (const e of entries) { if (e.isIntersecting) seen.add(e.target); else seen.delete(e.target); }
      if (Date.now() - keyMoved < 800) return; // the scroll a key made
      const top = files.find((f) => seen.has(f));
      if (top) { focusedFile = files.indexOf(top); markCurrent(focusedFile); }
    });
    files.forEach((f) => io.observe(f));
  }

  // threads in page order (the orphans last); n/p walk them
  let focusedThread = -1;
  // a file sent without its rows but with threads is a stop too: landing
  // on it loads it and goes on to its first (going back, its last) thread
  function threadStops() {
    return Array.from(document.querySelectorAll('[data-diff] tr.thread-row .thread, [data-diff] details.file[data-lazy][data-threads], .orphans .thread'));
  }
  async function gotoThread(step) {
    let all = threadStops();
    if (!all.length) return;
    focusedThread = Math.max(0, Math.min(all.length - 1, focusedThread + step));
    let t = all[focusedThread];
    if (t.matches('details.file')) {
      const f = t;
      if (!(await loadFile(f))) return;
      all = threadStops();
      const here = all.filter((x) => f.contains(x));
      if (!here.length) return;
      t = step > 0 ? here[0] : here[here.length - 1];
      focusedThread = all.indexOf(t);
    }
    const file = t.closest('details.file');
    if (file && !file.open) file.open = true;
    document.querySelectorAll('.thread.focused').forEach((x) => x.classList.remove('focused'));
    t.classList.add('focused');
    if (t.tagName === 'DETAILS') t.open = true; // landing on a thread is to read it
    t.scrollIntoView({ block: 'center' });
  }

  // the focused line: the last one clicked, else the link target, else the
  // first changed line of the current file
  let focusedLine = null;
  document.addEventListener('click', (e) => {
    const td = e.target.closest('td.code[data-line]');
    if (td) focusedLine = td;
    // a click in a file makes it the current one: j and k go on from there
    const f = e.target.closest('[data-diff] details.file');
    if (f && files.indexOf(f) !== focusedFile) {
      focusedFile = files.indexOf(f);
      keyMoved = Date.now();
      markCurrent(focusedFile);
    }
  });
  function lineToComment() {
    if (focusedLine && document.contains(focusedLine)) return focusedLine;
    if (location.hash) {
      const t = document.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (t && t.matches('td.code[data-line]')) return t;
    }
    const f = files[Math.max(0, focusedFile)];
    return f ? f.querySelector('tr.ln-add td.code[data-line], tr.ln-del td.code[data-line], td.code[data-line]') : null;
  }

  let help = null;
  function showHelp() {
    if (!help) {
      help = document.createElement('dialog');
      help.className = 'keys-help';
      const keys = [['j / k, ] / [', 'next / previous file'], ['n / p', 'next / previous thread'], ['o', 'open or close the current file'],
        ['c', 'comment on the focused line'], ['Tab, then ↑ / ↓', 'to a hunk, then along its lines (Enter comments)'],
        ['v or r', 'mark the current file viewed (or not)'], ['e / E', 'expand / collapse every thread'],
        ['s', 'unified or split'], ['w', 'scroll or wrap long lines'], ['a', 'write the message to the agent (unblock)'],
        ['u', 'up to the review queue'], ['/', 'search the whole diff'], ['?', 'this list'], ['Esc', 'close a dialog, or an empty comment form']];
      help.innerHTML = '<h2>Keys</h2><dl>' + keys.map((k) => '<dt>' + k[0] + '</dt><dd>' + k[1] + '</dd>').join('') + '</dl>' +
        '<form method="dialog"><button>Close</button></form>';
      document.body.append(help);
    }
    if (typeof help.showModal === 'function') help.showModal(); else help.setAttribute('open', '');
  }

  document.addEventListener('keydown', (e) => {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName))) return;
    if (document.querySelector('dialog[open]') && e.key !== '?') return;
    switch (e.key) {
      case 'j': gotoFile(+1); break;
      case 'k': gotoFile(-1); break;
      case 'n': gotoThread(+1); break;
      case 'p': gotoThread(-1); break;
      case 'v': {
        const f = files[focusedFile];
        if (f && task && reviewState) setViewed(f, !isViewed(f));
        break;
      }
      case 'c': {
        const td = lineToComment();
        if (!td || !tpl || !td.querySelector('a.comment-link')) return;
        const file = td.closest('details.file');
        if (file && !file.open) file.open = true;
        openForm(td);
        break;
      }
      case ']': gotoFile(+1); break;
      case '[': gotoFile(-1); break;
      case 'r': { // Gerrit's "reviewed"
        const f = files[focusedFile];
        if (f && task) setViewed(f, !isViewed(f));
        break;
      }
      case 'o': {
        const f = files[focusedFile];
        if (f) f.open = !f.open;
        break;
      }
      case 'e': case 'E': // a choice, as a click on each thread's summary is: a refresh keeps it
        document.querySelectorAll('details.thread').forEach((d) => {
          d.open = e.key === 'e';
          if (task && d.dataset.thread) setPref(threadKey(d), d.open ? 'open' : 'closed');
        });
        break;
      case 's': case 'w': {
        const mode = e.key === 's' ? 'lazy:difflayout' : 'lazy:diffwrap';
        const pressed = toolbar && toolbar.querySelector('[data-mode="' + mode + '"] button[aria-pressed="false"]:not([disabled])');
        if (!pressed) return;
        pressed.click();
        break;
      }
      case 'a': {
        const box = document.querySelector('.actions .unblock-form textarea');
        if (!box) return;
        box.scrollIntoView({ block: 'center' });
        box.focus();
        break;
      }
      case 'u': location.href = '/review'; break;
      case '/': {
        const q = document.querySelector('.diff-search input');
        if (!q) return;
        q.focus();
        q.select();
        break;
      }
      case '?': showHelp(); break;
      default: return;
    }
    e.preventDefault();
  });

  // ---- one tab stop per hunk: Tab walks the hunks, Up and Down its lines ----
  // (without script every line's link is a tab stop, as links are)
  function hunkTabStops(root) {
    for (const tb of root.querySelectorAll('table.diff-table > tbody')) {
      let first = true;
      for (const a of tb.querySelectorAll('a.comment-link')) { a.tabIndex = first ? 0 : -1; first = false; }
    }
  }
  hunkTabStops(document);
  document.addEventListener('keydown', (e) => {
    if ((e.key !== 'ArrowDown' && e.key !== 'ArrowUp') || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const a = e.target.closest && e.target.closest('a.comment-link');
    const tb = a && a.closest('tbody');
    if (!tb) return;
    const links = Array.from(tb.querySelectorAll('a.comment-link'));
    const to = links[links.indexOf(a) + (e.key === 'ArrowDown' ? 1 : -1)];
    if (!to) return;
    e.preventDefault();
    a.tabIndex = -1;
    to.tabIndex = 0;
    to.focus();
  });

  // ---- files sent closed without their rows: loaded when opened ----
  const loading = new Map(); // a file's load while it runs: one fetch however many ask

  // fillFile puts a file's body (the server's own escaped HTML: its table,
  // threads and forms) below d's summary in place of what was there, and
  // into the model and the layout shown
  function fillFile(d, htmlText) {
    const tmp = document.createElement('div');
    tmp.innerHTML = htmlText; // the server's own escaped HTML
    for (let i = model.length - 1; i >= 0; i--) {
      const m = model[i];
      if (!d.contains(m.table)) continue;
      if (m.split) m.split.remove();
      if (splitLater.delete(m.table) && nearView) nearView.unobserve(m.table);
      model.splice(i, 1);
    }
    Array.from(d.children).forEach((c) => { if (c.tagName !== 'SUMMARY') c.remove(); });
    d.append(...tmp.childNodes);
    hunkTabStops(d);
    d.querySelectorAll('table.diff-table').forEach((t) => {
      const m = { table: t, bodies: Array.from(t.tBodies), split: null };
      model.push(m);
      if (layout === 'split') splitOne(m);
    });
    restoreThreads(d);
  }

  // loadFile fetches the rows of a file sent without them; it resolves
  // true when they are on the page (at once for a file that has them)
  function loadFile(d) {
    const src = d.dataset.lazy;
    if (!src) return Promise.resolve(true);
    if (loading.has(d)) return loading.get(d);
    d.dataset.loading = '1';
    const p = (async () => {
      const note = d.querySelector('.lazy-note');
      try {
        const r = await fetch(src, { headers: { Accept: 'text/html' } });
        if (!r.ok) throw new Error('the daemon answered ' + r.status);
        fillFile(d, await r.text());
        delete d.dataset.lazy;
        return true;
      } catch (x) {
        if (note) note.textContent = 'Could not load this file (' + x.message + '); reload the page.';
        return false;
      } finally {
        delete d.dataset.loading;
        loading.delete(d);
      }
    })();
    loading.set(d, p);
    return p;
  }
  document.addEventListener('toggle', (e) => {
    const d = e.target;
    if (d.matches && d.matches('details.file[data-lazy]') && d.open) loadFile(d);
  }, true);
  document.addEventListener('click', (e) => {
    const a = e.target.closest('.lazy-note a');
    if (!a) return;
    e.preventDefault();
    a.closest('details.file').open = true;
  });

  // ---- every file reachable: a link to a line or a file (the file list,
  // the queued comments, a search hit, a typed #l-<path>-new-N) loads the
  // file it points to first, then scrolls there ----
  function fileOf(path) {
    return files.find((f) => f.dataset.path === path || f.dataset.oldPath === path) || null;
  }
  function byId(id) {
    let el = document.getElementById(id);
    if (!el) { try { el = document.getElementById(decodeURIComponent(id)); } catch (e) { /* not percent-encoded */ } }
    return el;
  }
  // pathOfFrag is the file a fragment id names (l-<path>-<side>-<n> or
  // file-<path>, the path escaped), or null for any other id
  function pathOfFrag(id) {
    const m = /^l-(.+)-(?:old|new)-\d+$/.exec(id) || /^file-(.+)$/.exec(id);
    if (!m) return null;
    try { return decodeURIComponent(m[1]); } catch (e) { return null; }
  }
  // fragOf is the id a link's fragment names and the file it is in: as
  // written, or percent-decoded once (a template escapes the % of an id)
  function fragOf(raw) {
    const ids = [raw];
    try { const d = decodeURIComponent(raw); if (d !== raw) ids.push(d); } catch (e) { /* as written only */ }
    for (const id of ids) {
      const el = document.getElementById(id);
      const f = el && el.closest('details.file');
      if (f) return { id, f };
    }
    for (const id of ids) {
      const path = pathOfFrag(id);
      const f = path === null ? null : fileOf(path);
      if (f) return { id, f };
    }
    return null;
  }
  async function reach(raw) {
    const at = fragOf(raw);
    if (!at) return false;
    const { id, f } = at;
    if (!(await loadFile(f))) return false;
    if (!f.open) f.open = true;
    const el = document.getElementById(id) || f;
    document.querySelectorAll('td.code.target').forEach((x) => x.classList.remove('target'));
    if (el.matches('td.code')) {
      el.classList.add('target');
      focusedLine = el;
      el.scrollIntoView({ block: 'center' });
    } else {
      el.scrollIntoView({ block: 'start' });
    }
    return true;
  }
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = e.target.closest('a[href^="#"]');
    if (!a) return;
    const id = a.getAttribute('href').slice(1);
    if (pathOfFrag(id) === null) return;
    e.preventDefault();
    if (location.hash.slice(1) !== id) history.pushState(null, '', '#' + id);
    reach(id);
  });
  window.addEventListener('hashchange', () => { if (pathOfFrag(location.hash.slice(1)) !== null) reach(location.hash.slice(1)); });
  if (location.hash) {
    const id = location.hash.slice(1);
    const el = byId(id);
    if (pathOfFrag(id) !== null && (!el || el.closest('details.file:not([open])'))) reach(id);
  }

  // ---- search over the whole diff: the server searches every file, the
  // ones sent without rows too; a hit is a link reach() follows ----
  if (task && toolbar && files.length) {
    const form = document.createElement('form');
    form.className = 'diff-search';
    form.setAttribute('role', 'search');
    const input = document.createElement('input');
    input.type = 'search';
    input.name = 'q';
    input.placeholder = 'Search the whole diff ( / )';
    input.setAttribute('aria-label', 'Search the whole diff');
    const go = document.createElement('button');
    go.type = 'submit';
    go.textContent = 'Search';
    const out = document.createElement('div');
    out.className = 'search-results';
    out.setAttribute('aria-live', 'polite');
    out.hidden = true;
    form.append(input, ' ', go);
    toolbar.append(form); // on the toolbar's line: the diff stays high on the page
    toolbar.after(out);
    input.addEventListener('keydown', (e) => { if (e.key === 'Escape') { out.hidden = true; input.blur(); } });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const q = input.value;
      if (!q.trim()) { out.hidden = true; return; }
      out.hidden = false;
      out.textContent = 'Searching…';
      try {
        const r = await fetch('/api/review/' + encodeURIComponent(task) + '/search?q=' + encodeURIComponent(q), { headers: { Accept: 'application/json' } });
        const j = await r.json().catch(() => ({}));
        if (!r.ok) throw new Error(j.error || ('the daemon answered ' + r.status));
        showHits(out, q, j);
      } catch (x) {
        out.textContent = 'Search failed: ' + x.message;
      }
    });
  }
  // showHits lists a search's answer; every text in it (paths, lines an
  // agent wrote) goes in as text, never as markup
  function showHits(out, q, j) {
    out.textContent = '';
    const head = document.createElement('p');
    head.className = 'search-count';
    const n = j.hits.length;
    head.textContent = (n === 0 && !j.files.length) ? 'Nothing in this diff matches “' + q + '”.'
      : n + (j.truncated ? '+' : '') + ' line' + (n === 1 ? '' : 's') + (j.files.length ? ' and ' + j.files.length + ' file name' + (j.files.length === 1 ? '' : 's') : '') + ' match “' + q + '”' + (j.truncated ? ' (the first ' + n + ' shown)' : '') + '.';
    out.append(head);
    const ol = document.createElement('ol');
    for (const path of j.files) {
      const f = fileOf(path);
      if (!f) continue;
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = '#' + f.id;
      a.className = 'search-file';
      a.textContent = path;
      li.append(a);
      ol.append(li);
    }
    for (const h of j.hits) {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = '#' + h.frag;
      a.className = 'search-hit';
      const where = document.createElement('span');
      where.className = 'hit-where';
      where.textContent = h.file + ':' + h.line + (h.side === 'old' ? ' (old)' : '');
      const text = document.createElement('code');
      text.className = 'hit-text';
      text.textContent = h.text;
      a.append(where, ' ', text);
      li.append(a);
      ol.append(li);
    }
    out.append(ol);
  }

  // ---- threads: a thread opened or closed by hand stays so ----
  const threadKey = (d) => 'lazy:thread:' + task + ':' + d.dataset.thread;
  // resolved (kept by the daemon): folded with a mark, until the thread
  // gets a new message; a resolved thread's comments still queued stay
  // queued and the thread says so
  function resolvedMark(d) {
    const m = reviewState && reviewState.resolved[d.dataset.thread];
    return m && m.messages === d.querySelectorAll(':scope > .msg').length ? m : null;
  }
  // queuedIn counts a thread's comments still queued, as the page shows them
  // (a withdraw or an unblock re-rendered since the mark was read counts)
  // (an ended task's never go: none counts)
  const taskEnded = !!document.querySelector('.ended-status');
  const queuedIn = (d) => (taskEnded ? 0 : d.querySelectorAll(':scope > .msg.msg-queued').length);
  function showResolvedQueued(d, mark) {
    let note = d.querySelector(':scope > .resolved-queued');
    const n = mark ? queuedIn(d) : 0;
    if (!n) { if (note) note.remove(); return; }
    if (!note) {
      note = document.createElement('p');
      note.className = 'resolved-queued';
      note.setAttribute('role', 'note');
      const reply = d.querySelector(':scope > .reply');
      if (reply) reply.before(note); else d.append(note);
    }
    note.textContent = n === 1
      ? 'Resolved, but its queued comment still goes to the agent with the next unblock: withdraw it above to keep it back.'
      : 'Resolved, but its ' + n + ' queued comments still go to the agent with the next unblock: withdraw them above to keep them back.';
  }
  async function setResolved(d, on) {
    try {
      const st = await postReviewState('resolved', { thread_id: d.dataset.thread, resolved: on });
      if (st.notice) reviewNotice(st.notice, false);
      if (on && !queuedIn(d)) d.open = false;
    } catch (x) {
      reviewNotice('Not saved: ' + x.message, true);
    }
  }
  function showResolved(d) {
    const resolved = resolvedMark(d);
    const on = !!resolved;
    showResolvedQueued(d, resolved);
    d.classList.toggle('resolved', on);
    let mark = d.querySelector(':scope > summary .resolved-tag');
    if (on && !mark) {
      mark = document.createElement('span');
      mark.className = 'tag resolved-tag';
      mark.textContent = 'resolved';
      d.querySelector(':scope > summary').prepend(mark, ' ');
    } else if (!on && mark) mark.remove();
    let btn = d.querySelector(':scope > .resolve');
    if (!btn) {
      btn = document.createElement('button');
      btn.type = 'button';
      btn.className = 'resolve';
      btn.addEventListener('click', () => setResolved(d, !d.classList.contains('resolved')));
      d.append(btn);
    }
    btn.textContent = on ? 'Unresolve' : 'Resolve';
    return on;
  }
  function restoreThreads(root) {
    if (!task) return;
    root.querySelectorAll('details.thread[data-thread]').forEach((d) => {
      const want = pref(threadKey(d), '');
      if (want) d.open = want === 'open';
      if (!reviewState) return;
      if (showResolved(d) && !queuedIn(d)) d.open = false;
    });
  }
  // only a click on its summary records a choice: a thread opened by the
  // page itself (parsing, a refresh) is not one
  document.addEventListener('click', (e) => {
    const s = e.target.closest('summary.thread-summary');
    const d = s && s.parentElement;
    if (task && d && d.matches('details.thread[data-thread]')) setPref(threadKey(d), d.open ? 'closed' : 'open');
  });
  restoreThreads(document);

  // ---- changes since your last review ----
  // The daemon keeps the head the reviewer last reviewed and rendered the
  // link from it; the page's head, once shown, is posted as reviewed.
  function markHeadSeen() {
    const head = document.querySelector('.review-head');
    if (!task || !reviewState || !head || !head.dataset.head || new URLSearchParams(location.search).has('since')) return;
    if (reviewState.head === head.dataset.head) return;
    postReviewState('seen', { head: head.dataset.head }).catch(() => { /* the next visit posts it again */ });
  }
  markHeadSeen();
  // back to this tab: another tab or browser may have marked something
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') fetchReviewState(); });

  // ---- the island: threads and the status bar follow the task's event
  // stream (each event: the threads JSON fetched again); polling only where
  // there is no EventSource or the stream is refused ----
  if (!task || !document.querySelector('.review-head')) return;

  const threadsURL = '/api/review/' + encodeURIComponent(task) + '/threads';
  let fingerprint = '';
  let timer = null;

  function updateBar(s) {
    const set = (k, v) => { const el = document.querySelector('[data-sb="' + k + '"]'); if (el) el.textContent = v; };
    set('status', s.status);
    set('turns', String(s.turns));
    set('queued', String(s.queued));
    set('asks_in_flight', String(s.asks_in_flight));
    set('can_answer', s.can_answer ? 'yes' : 'no');
    set('why', s.why || '');
    const la = document.querySelector('[data-sb="last_activity"]');
    if (la && s.last_activity) {
      const secs = Math.max(0, Math.round((Date.now() - Date.parse(s.last_activity)) / 1000));
      la.textContent = secs < 60 ? secs + 's ago' : Math.round(secs / 60) + 'm ago';
      la.title = s.last_activity;
    }
  }

  // refresh re-renders threads, orphans and queued lists from the server's
  // own HTML (the threads fragment: every thread, not the page), leaving
  // open forms and typed text alone.
  const partsURL = '/review/' + encodeURIComponent(task) + '/threads';
  async function refresh() {
    const here = new URLSearchParams(location.search);
    const keep = new URLSearchParams();
    for (const k of ['full', 'context']) if (here.get(k)) keep.set(k, here.get(k));
    const r = await fetch(partsURL + (keep.toString() ? '?' + keep : ''), { headers: { Accept: 'text/html' } });
    if (!r.ok) return;
    const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
    const rows = Array.from(doc.querySelectorAll('table.thread-rows tr.thread-row'));
    const touched = new Set(); // the tables whose split view is built again
    for (const fresh of rows) {
      const id = fresh.dataset.threadId;
      let placed = false;
      for (const m of model) {
        for (const tb of m.bodies) {
          const old = tb.querySelector('tr.thread-row[data-thread-id="' + CSS.escape(id) + '"]');
          if (!old) continue;
          old.replaceWith(document.importNode(fresh, true));
          placed = true;
          touched.add(m);
        }
      }
      if (placed) continue;
      for (const m of model) {
        for (const tb of m.bodies) {
          const anchor = tb.querySelector('td.code[id="' + CSS.escape(fresh.dataset.threadFor) + '"]');
          if (!anchor) continue;
          let after = anchor.closest('tr');
          while (after.nextElementSibling && after.nextElementSibling.dataset.threadFor === fresh.dataset.threadFor) after = after.nextElementSibling;
          after.after(document.importNode(fresh, true));
          touched.add(m);
        }
      }
    }
    const orphans = doc.querySelector('.orphans');
    const there = document.querySelector('.orphans');
    if (orphans && there) there.replaceWith(document.importNode(orphans, true));
    const list = doc.querySelector('.queued-list');
    if (list) {
      document.querySelectorAll('.queued-list').forEach((ul) => ul.replaceWith(document.importNode(list, true)));
      document.querySelectorAll('.queued-count').forEach((c) => { c.textContent = list.dataset.count; });
    }
    restoreThreads(document);
    if (layout === 'split') {
      // a table built already is built again (its panes kept where they
      // were scrolled); one not built yet is built from its rows later
      for (const m of touched) {
        if (!m.split) continue;
        const bars = m.split.querySelectorAll('.pane-bar');
        m.sx = bars.length === 2 ? { old: bars[0].scrollLeft, new: bars[1].scrollLeft } : null;
        m.split.remove();
        m.split = null;
        splitOne(m);
      }
    }
  }

  // ---- actions in place: withdraw and re-send post with fetch; the
  // thread, the orphans and the queue are then put in place, the window
  // kept where it was (without script the form posts and comes back) ----
  function toast(text, alert) {
    document.querySelectorAll('p.notice.toast').forEach((p) => p.remove());
    const p = document.createElement('p');
    p.className = 'notice toast' + (alert ? ' notice-alert' : '');
    p.setAttribute('role', alert ? 'alert' : 'status');
    p.textContent = text;
    body.append(p);
  }
  document.addEventListener('submit', async (e) => {
    const form = e.target;
    if (!form.matches || !form.matches('.msg-actions form')) return;
    e.preventDefault();
    const msg = form.closest('[data-msg]');
    const id = msg ? msg.dataset.msg : '';
    const before = msg ? msg.getBoundingClientRect().top : 0;
    form.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    try {
      const r = await fetch(form.action, { method: 'POST', headers: { Accept: 'application/json', 'X-Lazy-CSRF': body.dataset.csrf || '' }, body: new URLSearchParams(new FormData(form)) });
      const j = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(j.error || ('the daemon answered ' + r.status));
      await refresh();
      // the message acted on stays where it was in the window
      const now = id && document.querySelector('[data-diff] [data-msg="' + CSS.escape(id) + '"], .orphans [data-msg="' + CSS.escape(id) + '"]');
      if (now) window.scrollBy(0, now.getBoundingClientRect().top - before);
      toast(j.notice || 'Done.', false);
      poll(true);
    } catch (x) {
      form.querySelectorAll('button').forEach((b) => { b.disabled = false; });
      toast(x.message, true);
    }
  });

  // ---- context and the whole file, loaded in place: the ↕ of a hunk and
  // the file's "whole file" / "changes only" fetch the file's rows again
  // (without script they are links to the page showing them) ----
  document.addEventListener('click', async (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = e.target.closest('a.expand, a.whole-file');
    const d = a && a.closest('details.file');
    if (!d) return;
    const u = new URL(a.href, location.href);
    const full = u.searchParams.get('full') || '';
    if (u.pathname !== location.pathname || (full && full !== d.dataset.path)) return; // the raw file: a page of its own
    e.preventDefault();
    const q = new URLSearchParams({ path: d.dataset.path });
    if (full) q.set('full', full);
    if (full && u.searchParams.get('context')) q.set('context', u.searchParams.get('context'));
    try {
      const r = await fetch('/review/' + encodeURIComponent(task) + '/file?' + q, { headers: { Accept: 'text/html' } });
      if (!r.ok) {
        const j = await r.json().catch(() => ({}));
        throw new Error(j.error || ('the daemon answered ' + r.status));
      }
      const top = d.getBoundingClientRect().top;
      fillFile(d, await r.text());
      delete d.dataset.lazy;
      d.open = true;
      const whole = d.querySelector(':scope > summary a.whole-file');
      if (whole && !whole.href.includes('/raw?')) {
        const isWhole = full !== '' && !u.searchParams.get('context');
        whole.textContent = isWhole ? 'changes only' : 'whole file';
        whole.href = isWhole ? '?#' + d.id : '?' + new URLSearchParams({ full: d.dataset.path }) + '#' + d.id;
      }
      d.dataset.expanded = full ? (u.searchParams.get('context') || 'whole') : '';
      if (a.classList.contains('whole-file')) window.scrollBy(0, d.getBoundingClientRect().top - top);
    } catch (x) {
      toast('Could not load the lines (' + x.message + '); reload the page and try again.', true);
    }
  });

  async function poll(now) {
    if (timer) clearTimeout(timer);
    let next = 10000;
    try {
      const r = await fetch(threadsURL, { headers: { Accept: 'application/json' } });
      if (r.ok) {
        const p = await r.json();
        updateBar(p.state);
        next = p.pending > 0 ? 3000 : 10000; // a queued comment alone never speeds the poll
        const fp = JSON.stringify([p.threads, p.queued]);
        if (fingerprint && fp !== fingerprint && !now) await refresh();
        fingerprint = fp;
        await fetchReviewState();
      }
    } catch (e) { /* the daemon may be restarting: try again later */ }
    if (source) { body.dataset.pollMs = 'stream'; return; } // the next event fetches again
    body.dataset.pollMs = String(next);
    timer = setTimeout(() => poll(false), next);
  }

  let source = null, kickTimer = null;
  function kick() {
    if (kickTimer) return;
    kickTimer = setTimeout(() => { kickTimer = null; poll(false); }, 100);
  }
  function listen() {
    if (!window.EventSource) return;
    source = new EventSource('/api/tasks/' + encodeURIComponent(task) + '/events');
    source.onopen = kick; // (re)connected: catch up
    source.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.kind === 'net' || ev.kind === 'transcript') return;
      if (ev.kind === 'daemon_stopped') { source.close(); source = null; poll(false); return; }
      kick();
    };
    source.onerror = () => {
      // refused outright (not served, logged out): poll instead
      if (source && source.readyState === EventSource.CLOSED) { source = null; poll(false); }
    };
  }

  listen();
  poll(false);
})();
