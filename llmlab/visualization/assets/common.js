// Shared helpers for llmlab's views. Plain DOM, no libraries, safe to include many times.
//
// Every table of cells is built by L.grid, so every view behaves the same way:
//  - the table sits in a scroll box with a sticky header row and a sticky first column;
//  - the readout above it has a fixed height (it never pushes the table);
//  - hover shows a cell, a click (or a tap) pins it, a click on another cell moves the pin, a
//    click on the pinned cell unpins it; hovering never overrides a pin;
//  - the cells form an ARIA grid: Tab enters it, arrow keys move, Enter or Space pins, Escape
//    unpins; each cell has an aria-label and the readout is announced (aria-live).
window.llmlab = window.llmlab || {};
window.llmlab.views = window.llmlab.views || {};
(function (L) {
  // el('td', {class: 'x', title: 'y'}, 'text') -> a new element
  L.el = function (tag, attrs, text) {
    var node = document.createElement(tag);
    for (var key in (attrs || {})) node.setAttribute(key, attrs[key]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  };
  L.clamp = function (v) { return Math.max(0, Math.min(1, v)); };
  // the same colour scales as llmlab/visualization/html.py
  L.blue = function (v) { return 'rgba(31,119,180,' + L.clamp(v).toFixed(3) + ')'; };
  L.diverging = function (v, vmax) {
    var a = vmax > 0 ? L.clamp(Math.abs(v) / vmax) : 0;
    return (v >= 0 ? 'rgba(31,119,180,' : 'rgba(214,39,40,') + a.toFixed(3) + ')';
  };
  L.ink = function (alpha) { return alpha > 0.55 ? '#fff' : '#111'; };
  // random numbers for the samplers (a test may replace it with a seeded one)
  L.random = L.random || Math.random;
  // base64 of one byte per value -> Float32Array of values in [0, 1]
  L.unpack = function (b64) {
    var bin = atob(b64), out = new Float32Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i) / 255;
    return out;
  };
  // <select> with the given labels; onchange(index)
  L.select = function (labels, selected, onchange) {
    var s = L.el('select');
    labels.forEach(function (label, i) {
      var o = L.el('option', {value: i}, label);
      if (i === selected) o.selected = true;
      s.appendChild(o);
    });
    s.addEventListener('change', function () { onchange(parseInt(s.value, 10)); });
    return s;
  };
  L.labelled = function (text, control) {
    var span = L.el('label', {'class': 'llmlab-control'}, text + ' ');
    span.appendChild(control);
    return span;
  };
  L.clear = function (node) { while (node.firstChild) node.removeChild(node.firstChild); };
  L.fmt = function (n) { return Math.round(n).toLocaleString('en-US'); };

  // A readout panel that reserves room for its usual number of lines (so hovering does not move what
  // is below it) and grows, rather than cutting text, when a narrow screen wraps a line.
  L.readout = function (lines, text) {
    var r = L.el('div', {'class': 'llmlab-readout', role: 'status', 'aria-live': 'polite'}, text);
    r.style.minHeight = (lines * 1.35 + 0.5) + 'em';
    return r;
  };

  // A one-line key to the symbols of the book's token display, for the symbols that `tokens` use.
  L.tokenKey = function (tokens) {
    var text = tokens.join(''), parts = [];
    if (text.indexOf('\u2423') >= 0) parts.push('\u2423 is a space (\u2423Paris = " Paris")');
    if (text.indexOf('\u21b5') >= 0) parts.push('\u21b5 a newline');
    if (text.indexOf('\u21e5') >= 0) parts.push('\u21e5 a tab');
    if (/<[0-9a-f]{2}>/.test(text)) parts.push('<e5> one byte of a character split across tokens');
    if (text.indexOf('\u27e8') >= 0) parts.push('\u27e8\u2026\u27e9 a special token');
    return parts.length ? L.el('div', {'class': 'llmlab-note llmlab-token-key'}, 'In tokens: ' + parts.join('; ') + '.') : null;
  };

  // A colour legend: opts = {label, scale: 'blue'|'diverging'|'binary', min, max, items}
  L.legend = function (opts) {
    var box = L.el('div', {'class': 'llmlab-legend', role: 'img'});
    var parts = [];
    if (opts.scale === 'binary') {
      opts.items.forEach(function (item) {
        var entry = L.el('span', {'class': 'llmlab-legend-item'});   // a swatch never wraps away from its text
        var sw = L.el('span', {'class': 'llmlab-swatch'});
        sw.style.background = item.colour;
        if (item.border) sw.style.border = item.border;
        entry.appendChild(sw);
        entry.appendChild(L.el('span', {'class': 'llmlab-legend-text'}, item.text));
        box.appendChild(entry);
        parts.push(item.text);
      });
      box.setAttribute('aria-label', 'legend: ' + parts.join(', '));
      return box;
    }
    var fmt = function (v) { return Math.abs(v) >= 100 ? v.toFixed(0) : (+v.toFixed(2)).toString(); };
    if (opts.label) box.appendChild(L.el('span', {'class': 'llmlab-legend-text'}, opts.label));
    box.appendChild(L.el('span', {'class': 'llmlab-legend-min'}, fmt(opts.min)));
    var ramp = L.el('span', {'class': 'llmlab-ramp'});
    ramp.style.background = opts.scale === 'diverging'
      ? 'linear-gradient(to right, rgba(214,39,40,1), rgba(214,39,40,0) 50%, rgba(31,119,180,0) 50%, rgba(31,119,180,1))'
      : 'linear-gradient(to right, rgba(31,119,180,0), rgba(31,119,180,1))';
    box.appendChild(ramp);
    box.appendChild(L.el('span', {'class': 'llmlab-legend-max'}, fmt(opts.max)));
    box.setAttribute('aria-label', 'colour scale' + (opts.label ? ' for ' + opts.label : '') + ': from ' +
      fmt(opts.min) + ' (' + (opts.scale === 'diverging' ? 'red' : 'white') + ') to ' + fmt(opts.max) + ' (blue)');
    return box;
  };

  // A table of cells with sticky headers, pinning and keyboard access (see the top of this file).
  // opts: {rows: [str], cols: [str], corner: str, label: str (the grid's name), className,
  //        text(i, j) -> str (cell text, optional), aria(i, j) -> str (a cell's spoken label),
  //        show(i, j, pinned) (called whenever the active cell changes or is pinned/unpinned)}
  L.grid = function (opts) {
    var g = {i: -1, j: -1, pinned: false, cells: [], rowHeads: [], colHeads: []}, tabCell = null;
    var box = L.el('div', {'class': 'llmlab-scroll'});
    var table = L.el('table', {'class': 'llmlab-grid' + (opts.className ? ' ' + opts.className : ''), role: 'grid',
      'aria-label': (opts.label || 'table') + '. Arrow keys move between cells, Enter pins a cell.'});
    var head = L.el('thead'), body = L.el('tbody');
    var hr = L.el('tr', {role: 'row'});
    hr.appendChild(L.el('th', {'class': 'llmlab-corner', role: 'columnheader'}, opts.corner || ''));
    opts.cols.forEach(function (c, j) {
      var th = L.el('th', {'class': 'llmlab-col', role: 'columnheader', scope: 'col', 'data-j': j});
      th.appendChild(L.el('span', {'class': 'llmlab-col-text'}, c));
      hr.appendChild(th);
      g.colHeads.push(th);
    });
    head.appendChild(hr);
    opts.rows.forEach(function (r, i) {
      var tr = L.el('tr', {role: 'row'});
      var th = L.el('th', {'class': 'llmlab-row', role: 'rowheader', scope: 'row', 'data-i': i}, r);
      tr.appendChild(th);
      g.rowHeads.push(th);
      var row = [];
      for (var j = 0; j < opts.cols.length; j++) {
        var td = L.el('td', {'class': 'llmlab-cell', role: 'gridcell', tabindex: '-1', 'data-i': i, 'data-j': j},
          opts.text ? opts.text(i, j) : null);
        tr.appendChild(td);
        row.push(td);
      }
      g.cells.push(row);
      body.appendChild(tr);
    });
    table.appendChild(head);
    table.appendChild(body);
    box.appendChild(table);
    g.box = box;
    g.table = table;
    if (g.cells.length && g.cells[0].length) { tabCell = g.cells[0][0]; tabCell.setAttribute('tabindex', '0'); }

    // the spoken labels (call again when the data behind the cells change)
    g.relabel = function () {
      if (!opts.aria) return;
      for (var i = 0; i < g.cells.length; i++) {
        for (var j = 0; j < g.cells[i].length; j++) g.cells[i][j].setAttribute('aria-label', opts.aria(i, j));
      }
    };
    g.relabel();

    function mark(i, j) {
      if (g.i >= 0) {
        g.cells[g.i][g.j].classList.remove('llmlab-hl', 'llmlab-pin');
        g.cells[g.i][g.j].removeAttribute('aria-selected');
        g.rowHeads[g.i].classList.remove('llmlab-hl');
        g.colHeads[g.j].classList.remove('llmlab-hl');
      }
      g.i = i; g.j = j;
      var td = g.cells[i][j];
      td.classList.add(g.pinned ? 'llmlab-pin' : 'llmlab-hl');
      if (tabCell) tabCell.setAttribute('tabindex', '-1');
      tabCell = td;
      td.setAttribute('tabindex', '0');
      td.setAttribute('aria-selected', g.pinned ? 'true' : 'false');
      g.rowHeads[i].classList.add('llmlab-hl');
      g.colHeads[j].classList.add('llmlab-hl');
    }
    // how: 'hover' (never overrides a pin), 'click' (pin, move the pin, or unpin), 'key' (moves the pin along)
    g.activate = function (i, j, how) {
      if (how === 'hover' && g.pinned) return;
      if (how === 'click') g.pinned = !(g.pinned && g.i === i && g.j === j);
      mark(i, j);
      if (opts.show) opts.show(i, j, g.pinned);
    };
    g.unpin = function () {
      if (!g.pinned) return;
      g.pinned = false;
      mark(g.i, g.j);
      if (opts.show) opts.show(g.i, g.j, false);
    };
    function cellOf(e) {
      var td = e.target.closest ? e.target.closest('td.llmlab-cell') : null;
      return td && table.contains(td) ? [parseInt(td.getAttribute('data-i'), 10), parseInt(td.getAttribute('data-j'), 10)] : null;
    }
    var pointerDown = false;
    table.addEventListener('mouseover', function (e) { var c = cellOf(e); if (c) g.activate(c[0], c[1], 'hover'); });
    table.addEventListener('mousedown', function () { pointerDown = true; });
    table.addEventListener('click', function (e) {
      pointerDown = false;
      var c = cellOf(e);
      if (c) g.activate(c[0], c[1], 'click');
    });
    table.addEventListener('focusin', function (e) {
      var c = cellOf(e);
      if (c && !pointerDown && (c[0] !== g.i || c[1] !== g.j)) g.activate(c[0], c[1], 'key');
    });
    table.addEventListener('keydown', function (e) {
      var c = cellOf(e);
      if (!c) return;
      var i = c[0], j = c[1], n = g.cells.length, m = g.cells[0].length;
      var moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
                   Home: [0, -m], End: [0, m], PageUp: [-10, 0], PageDown: [10, 0]};
      if (moves[e.key]) {
        e.preventDefault();
        i = Math.max(0, Math.min(n - 1, i + moves[e.key][0]));
        j = Math.max(0, Math.min(m - 1, j + moves[e.key][1]));
        g.activate(i, j, 'key');
        g.cells[i][j].focus({preventScroll: false});
      } else if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        g.activate(i, j, 'click');
      } else if (e.key === 'Escape') {
        g.unpin();
      }
    });
    return g;
  };

  // Keyboard and touch access for a row of tokens (spans): focusable, announced, arrow keys move.
  // onActivate(k, how) with how = 'hover' | 'click' | 'key'.
  L.tokenLine = function (container, spans, describe, onActivate) {
    container.setAttribute('role', 'listbox');
    container.setAttribute('aria-orientation', 'horizontal');
    spans.forEach(function (span, k) {
      span.setAttribute('role', 'option');
      span.setAttribute('tabindex', k === 0 ? '0' : '-1');
      span.setAttribute('aria-label', describe(k));
    });
    function indexOf(e) {
      var s = e.target.closest ? e.target.closest('.llmlab-tok') : null;
      return s && container.contains(s) ? spans.indexOf(s) : -1;
    }
    var pointerDown = false;
    container.addEventListener('mouseover', function (e) { var k = indexOf(e); if (k >= 0) onActivate(k, 'hover'); });
    container.addEventListener('mousedown', function () { pointerDown = true; });
    container.addEventListener('click', function (e) { pointerDown = false; var k = indexOf(e); if (k >= 0) onActivate(k, 'click'); });
    container.addEventListener('focusin', function (e) { var k = indexOf(e); if (k >= 0 && !pointerDown) onActivate(k, 'key'); });
    container.addEventListener('keydown', function (e) {
      var k = indexOf(e);
      if (k < 0) return;
      var step = {ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1}[e.key];
      if (step) {
        e.preventDefault();
        var next = Math.max(0, Math.min(spans.length - 1, k + step));
        spans[k].setAttribute('tabindex', '-1');
        spans[next].setAttribute('tabindex', '0');
        spans[next].focus();
        // focusin does this too, but not when the window itself lacks focus (a background tab)
        if (document.activeElement !== spans[next] || !document.hasFocus()) onActivate(next, 'key');
      } else if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        onActivate(k, 'click');
      }
    });
  };

  // ---------------------------------------------------------------- the live model (built book only)
  // A view whose data has `live` gets a prompt box and a "Run live" button above it, where the page
  // is part of the built book (it has a _static/ folder holding live/llmlab-live.js). The build-time
  // view stays the default; the model loads only when the reader asks, and each kind of view turns
  // the live result into its own data (L.liveData[kind]), so it redraws with its usual controls.
  L.liveData = L.liveData || {};
  L.liveSettings = L.liveSettings || {};   // kind -> function (the view's node) -> data fields to keep
  L.staticRoot = function () {
    var root = document.documentElement.getAttribute('data-content_root');
    if (root !== null) return new URL(root + '_static/', document.baseURI).href;
    var scripts = document.querySelectorAll('script[src]');
    for (var i = 0; i < scripts.length; i++) {
      var m = /^(.*\/_static\/)/.exec(scripts[i].src);
      if (m) return m[1];
    }
    return null;
  };
  L.loadLive = function (staticRoot) {
    if (window.llmlabLive) return Promise.resolve(window.llmlabLive);
    if (!L._liveLoading) {
      L._liveLoading = new Promise(function (resolve, reject) {
        var tag = L.el('script', {src: staticRoot + 'live/llmlab-live.js'});
        tag.onload = function () { resolve(window.llmlabLive); };
        tag.onerror = function () {
          L._liveLoading = null;
          reject(new Error('Could not load ' + tag.src + ': the live model ships with the built book only.'));
        };
        document.head.appendChild(tag);
      });
    }
    return L._liveLoading;
  };
  L.mount = function (root, kind, data) {
    var view = L.views[kind], staticRoot = data.live ? L.staticRoot() : null;
    if (!staticRoot || !L.liveData[kind]) { view(root, data); return; }
    L.clear(root);
    var bar = L.el('div', {'class': 'llmlab-live'});
    var input = L.el('input', {type: 'text', 'class': 'llmlab-live-prompt', 'data-name': 'live-prompt',
      'aria-label': 'your prompt for the live model', placeholder: 'Type a prompt, English or Chinese'});
    input.value = data.live.prompt || '';
    var run = L.el('button', {type: 'button', 'data-action': 'run-live'}, 'Run live');
    var back = L.el('button', {type: 'button', 'data-action': 'show-book'}, "back to the book's view");
    back.hidden = true;
    var status = L.el('div', {'class': 'llmlab-live-status', role: 'status', 'aria-live': 'polite'},
      'Type any prompt and press "Run live": SmolLM2-135M runs in this page (the first run loads about 120 MB).');
    bar.appendChild(input);
    bar.appendChild(run);
    bar.appendChild(back);
    bar.appendChild(status);
    var inner = L.el('div', {'class': 'llmlab-live-view'});
    root.appendChild(bar);
    root.appendChild(inner);
    view(inner, data);
    function progress(e) {
      var d = e.detail;
      if (d.status === 'loading') status.textContent = 'Loading the model: ' + Math.round(d.loaded / 1e6) + ' of ' + Math.round(d.total / 1e6) + ' MB';
      else if (d.status === 'starting') status.textContent = 'Starting the model (WebAssembly, one thread) ...';
    }
    function go() {
      var prompt = input.value;
      run.disabled = true;
      status.textContent = 'Running ...';
      window.addEventListener('llmlab-live', progress);
      // the reader's current settings (layer, head, temperature ...) carry over to the live view
      var current = L.liveSettings[kind] ? L.liveSettings[kind](inner) : {};
      L.loadLive(staticRoot).then(function (live) { return live.run(prompt); }).then(function (r) {
        view(inner, L.liveData[kind](r, Object.assign({}, data, current)));
        inner.setAttribute('data-live', 'yes');
        back.hidden = false;
        status.textContent = 'Live: SmolLM2-135M in your browser, on your prompt (' + r.ids.length + ' tokens).';
      }).catch(function (error) {
        status.textContent = error.message;
      }).then(function () {
        run.disabled = false;
        window.removeEventListener('llmlab-live', progress);
      });
    }
    run.addEventListener('click', go);
    input.addEventListener('keydown', function (e) { if (e.key === 'Enter') { e.preventDefault(); go(); } });
    back.addEventListener('click', function () {
      view(inner, data);
      inner.removeAttribute('data-live');
      back.hidden = true;
      status.textContent = "The book's view, computed when the book was built.";
    });
  };
})(window.llmlab);
