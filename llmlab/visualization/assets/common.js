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
  // The page's language: a view in a page whose <html lang> starts with "zh" (the Chinese edition) speaks
  // Chinese. L.t('Run live') is the text a reader sees: the English text itself, or its entry in L.ZH
  // (zh.js) on a Chinese page; {name} placeholders are filled from vars after the lookup, so numbers,
  // tokens and identifiers pass through unchanged. A text without an entry stays English.
  L.lang = function () { return /^zh/i.test(document.documentElement.getAttribute('lang') || '') ? 'zh' : 'en'; };
  L.t = function (text, vars) {
    var s = L.lang() === 'zh' && L.ZH && L.ZH[text] !== undefined ? L.ZH[text] : text;
    return vars ? s.replace(/\{(\w+)\}/g, function (m, k) { return vars[k] === undefined ? m : String(vars[k]); }) : s;
  };
  // An error of the live model as the reader reads it. llmlab-live.js (page and worker) writes its errors in
  // English, as llmlab's API does; on a Chinese page the first pattern of L.ZH_ERRORS (zh.js) that matches
  // gives the Chinese, with the pieces it captured (what was given, the limits) in place of $1, $2 ...
  L.message = function (error) {
    var text = error && error.message !== undefined ? String(error.message) : String(error);
    if (L.lang() !== 'zh') return text;
    var list = L.ZH_ERRORS || [];
    for (var i = 0; i < list.length; i++) if (list[i][0].test(text)) return text.replace(list[i][0], list[i][1]);
    return text;
  };
  // A layer's name as the book's Python code writes it ("block 12", "embed"), in the page's language;
  // the number stays last, where the live panels read it.
  L.layerName = function (name) {
    var m = /^block (\d+)$/.exec(name);
    return m ? L.t('block {n}', {n: m[1]}) : name === 'embed' ? L.t('embed') : name;
  };
  L.fmt = function (n) { return Math.round(n).toLocaleString('en-US'); };

  // A readout panel that reserves room for its usual number of lines (so hovering does not move what
  // is below it) and grows, rather than cutting text, when a narrow screen wraps a line.
  L.readout = function (lines, text) {
    var r = L.el('div', {'class': 'llmlab-readout', role: 'status', 'aria-live': 'polite'}, text);
    r.style.minHeight = (lines * 1.35 + 0.5) + 'em';
    return r;
  };

  // A one-line key to the symbols of the book's token display, for the symbols that `tokens` use.
  // Byte pieces made readable: tokens shown as <e5><9b> and <bd> (pieces of one character, as
  // llmlab.visualization.show_token writes them) become "国 1/2" and "国 2/2": the character (or the
  // characters) that the run of tokens makes together, and which piece of the run each token is.
  // Other tokens keep their label; a run that does not make whole characters keeps its bytes.
  var SHOWN_AS = {'\u2423': 32, '\u21b5': 10, '\u21e5': 9, '\u240d': 13};
  function labelBytes(label) {                  // null for a special token (it never joins a run)
    if (/^\u27e8.*\u27e9$/.test(label)) return null;
    var out = [], enc = new TextEncoder(), rest = label, m;
    while (rest.length) {
      if ((m = /^<([0-9a-f]{2})>/.exec(rest))) { out.push(parseInt(m[1], 16)); rest = rest.slice(4); continue; }
      var ch = String.fromCodePoint(rest.codePointAt(0));
      if (SHOWN_AS[ch] !== undefined) out.push(SHOWN_AS[ch]); else enc.encode(ch).forEach(function (b) { out.push(b); });
      rest = rest.slice(ch.length);
    }
    return out;
  }
  function endsInside(bytes) {
    for (var back = 1; back <= Math.min(4, bytes.length); back++) {
      var b0 = bytes[bytes.length - back];
      if ((b0 & 0xC0) === 0x80) continue;
      return (b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 1) > back;
    }
    return false;
  }
  L.readableTokens = function (tokens) {
    var labels = tokens.slice(), bytes = tokens.map(labelBytes), decoder = new TextDecoder('utf-8', {fatal: true}), k = 0;
    while (k < tokens.length) {
      var end = k + 1, run = bytes[k] ? bytes[k].slice() : null;
      while (run && end < tokens.length && bytes[end] &&
             (endsInside(run) || (bytes[end].length && (bytes[end][0] & 0xC0) === 0x80))) {
        run = run.concat(bytes[end]);
        end++;
      }
      if (end - k > 1 && tokens.slice(k, end).some(function (t) { return /<[0-9a-f]{2}>/.test(t); })) {
        var text = null;
        try { text = decoder.decode(Uint8Array.from(run)); } catch (e) { text = null; }
        if (text !== null) {
          var shown = Array.from(text).map(function (ch) {
            for (var sym in SHOWN_AS) if (SHOWN_AS[sym] === ch.charCodeAt(0)) return sym;
            return ch;
          }).join('');
          for (var j = k; j < end; j++) labels[j] = shown + ' ' + (j - k + 1) + '/' + (end - k);
        }
      }
      k = end;
    }
    return labels;
  };

  L.tokenKey = function (tokens) {
    var text = tokens.join(''), parts = [];
    if (text.indexOf('\u2423') >= 0) parts.push(L.t('\u2423 is a space (\u2423Paris = " Paris")'));
    if (text.indexOf('\u21b5') >= 0) parts.push(L.t('\u21b5 a newline'));
    if (text.indexOf('\u21e5') >= 0) parts.push(L.t('\u21e5 a tab'));
    if (/<[0-9a-f]{2}>/.test(text)) parts.push(L.t('<e5> one byte of a character split across tokens'));
    var piece = tokens.filter(function (t) { return / 1\/\d+$/.test(t); })[0];
    if (piece) {
      var m = / 1\/(\d+)$/.exec(piece);
      parts.push(L.t('{piece}: the first of {n} tokens that make "{text}" together',
                     {piece: piece, n: m[1], text: piece.replace(/ 1\/\d+$/, '')}));
    }
    if (text.indexOf('\u27e8') >= 0) parts.push(L.t('\u27e8\u2026\u27e9 a special token'));
    return parts.length ? L.el('div', {'class': 'llmlab-note llmlab-token-key'},
                               L.t('In tokens: {parts}.', {parts: parts.join(L.t('; '))})) : null;
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
      box.setAttribute('aria-label', L.t('legend: {items}', {items: parts.join(L.t(', '))}));
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
    var scale = {label: opts.label, min: fmt(opts.min), max: fmt(opts.max),
                 low: opts.scale === 'diverging' ? L.t('red') : L.t('white')};
    box.setAttribute('aria-label', opts.label ? L.t('colour scale for {label}: from {min} ({low}) to {max} (blue)', scale)
                                              : L.t('colour scale: from {min} ({low}) to {max} (blue)', scale));
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
      'aria-label': L.t('{name}. Arrow keys move between cells, Enter pins a cell.', {name: opts.label || L.t('table')})});
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
  L.liveOptions = L.liveOptions || {};     // kind -> function (data, llmlabLive) -> llmlabLive.run's options
  L.liveExtras = L.liveExtras || {};       // kind -> function (root, data, staticRoot): more live panels
  L.liveRun = L.liveRun || {};             // kind -> function (llmlabLive, prompt): instead of llmlabLive.run
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
  // The live model's files ship once, with the English site: a page of another language's site
  // (built into a folder of it) names the English _static/ in <meta name="llmlab-live-static">.
  L.liveRoot = function () {
    var meta = document.querySelector('meta[name="llmlab-live-static"]');
    if (meta) return new URL(meta.getAttribute('content'), document.baseURI).href;
    return L.staticRoot();
  };
  L.loadLive = function (staticRoot) {
    if (window.llmlabLive) return Promise.resolve(window.llmlabLive);
    if (!L._liveLoading) {
      L._liveLoading = new Promise(function (resolve, reject) {
        var tag = L.el('script', {src: staticRoot + 'live/llmlab-live.js'});
        tag.onload = function () { resolve(window.llmlabLive); };
        tag.onerror = function () {
          L._liveLoading = null;
          reject(new Error(L.t('Could not load {url}: the live model ships with the built book only.', {url: tag.src})));
        };
        document.head.appendChild(tag);
      });
    }
    return L._liveLoading;
  };
  L.mount = function (root, kind, data) {
    var view = L.views[kind], staticRoot = data.live ? L.liveRoot() : null;
    if (!staticRoot || !L.liveData[kind]) { view(root, data); return; }
    L.clear(root);
    var bar = L.el('div', {'class': 'llmlab-live'});
    var input = L.el('input', {type: 'text', 'class': 'llmlab-live-prompt', 'data-name': 'live-prompt',
      'aria-label': L.t('your prompt for the live model'), placeholder: L.t('Type a prompt, English or Chinese')});
    input.value = data.live.prompt || '';
    var run = L.el('button', {type: 'button', 'data-action': 'run-live'}, L.t('Run live'));
    var back = L.el('button', {type: 'button', 'data-action': 'show-book'}, L.t("back to the book's view"));
    back.hidden = true;
    var status = L.el('div', {'class': 'llmlab-live-status', role: 'status', 'aria-live': 'polite'},
      L.t('Type any prompt of up to 256 tokens and press "Run live": SmolLM2-135M runs in this page (the first run ' +
          'loads about 120 MB; the next chapters reuse it where the browser keeps it).'));
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
      if (d.status === 'loading') status.textContent = L.t('Loading the model: {done} of {total} MB', {done: Math.round(d.loaded / 1e6), total: Math.round(d.total / 1e6)});
      else if (d.status === 'starting') status.textContent = L.t('Starting the model (WebAssembly, one thread) ...');
    }
    function go() {
      var prompt = input.value;
      run.disabled = true;
      status.textContent = L.t('Running ...');
      window.addEventListener('llmlab-live', progress);
      // the reader's current settings (layer, head, temperature ...) carry over to the live view
      var current = L.liveSettings[kind] ? L.liveSettings[kind](inner) : {};
      var settings = Object.assign({}, data, current);
      L.loadLive(staticRoot).then(function (live) {
        // each kind of view asks for what it shows (L.liveOptions[kind]: run's options, or a promise of them)
        if (L.liveRun[kind]) return L.liveRun[kind](live, prompt);      // e.g. the tokens view: the tokenizer only
        return Promise.resolve(L.liveOptions[kind] ? L.liveOptions[kind](settings, live) : undefined)
          .then(function (options) { return live.run(prompt, options); });
      }).then(function (r) {
        view(inner, L.liveData[kind](r, settings));
        inner.setAttribute('data-live', 'yes');
        back.hidden = false;
        status.textContent = L.t('Live: SmolLM2-135M in your browser, on your prompt ({n} tokens).', {n: r.ids.length});
      }).catch(function (error) {
        status.textContent = L.message(error);
      }).then(function () {
        run.disabled = false;
        window.removeEventListener('llmlab-live', progress);
      });
    }
    run.addEventListener('click', go);
    input.addEventListener('keydown', function (e) { if (e.key === 'Enter') { e.preventDefault(); go(); } });
    if (L.liveExtras[kind]) L.liveExtras[kind](root, data, staticRoot);
    back.addEventListener('click', function () {
      view(inner, data);
      inner.removeAttribute('data-live');
      back.hidden = true;
      status.textContent = L.t("The book's view, computed when the book was built.");
    });
  };

  // ---------------------------------------------------------------- writing with the live model
  // A panel where the model writes: a prompt, the sampling sliders (temperature, top-k, top-p, min-p),
  // "Write" and "Stop", and the text streaming in, each token shaded by the probability it was drawn
  // with. chat: a chat box instead (SmolLM2's chat template; it stops at the end of its turn).
  // opts: {prompt, chat: bool, temperature, top_k, top_p, min_p, maxNewTokens}
  L.writer = function (staticRoot, opts) {
    opts = opts || {};
    var box = L.el('div', {'class': 'llmlab-writer', 'data-writer': opts.chat ? 'chat' : 'write'});
    box.appendChild(L.el('div', {'class': 'llmlab-title'}, opts.chat ? L.t('Ask SmolLM2-135M (live, in your browser)')
      : L.t('Write: SmolLM2-135M continues your text with these settings (live, in your browser)')));
    var input = L.el(opts.chat ? 'input' : 'textarea', {'class': 'llmlab-live-prompt', 'data-name': 'writer-prompt',
      'aria-label': opts.chat ? L.t('your question') : L.t('the text to continue'), rows: 2});
    input.value = opts.prompt || (opts.chat ? 'What is the capital of France?' : 'Once upon a time');   // model input: as in the English book
    box.appendChild(input);
    var controls = L.el('div', {'class': 'llmlab-controls'}), sliders = {};
    function slider(name, label, min, max, step, value, show) {
      var s = L.el('input', {type: 'range', min: min, max: max, step: step, 'data-name': 'writer-' + name});
      s.value = value;
      var shown = L.el('span', {'class': 'llmlab-slider-value'}, show(value));
      s.addEventListener('input', function () { shown.textContent = show(parseFloat(s.value)); });
      var wrap = L.labelled(label, s);
      wrap.appendChild(shown);
      controls.appendChild(wrap);
      sliders[name] = s;
    }
    slider('temperature', L.t('temperature'), 0, 2, 0.05, opts.temperature === undefined ? 0.7 : opts.temperature,
           function (v) { return v === 0 ? L.t('0 (greedy)') : v.toFixed(2); });
    slider('top_k', 'top-k', 0, 100, 1, opts.top_k || 0, function (v) { return v ? String(v) : L.t('off'); });
    slider('top_p', 'top-p', 0.05, 1, 0.05, opts.top_p || 0.95, function (v) { return v >= 1 ? L.t('off') : v.toFixed(2); });
    slider('min_p', 'min-p', 0, 0.5, 0.01, opts.min_p || 0, function (v) { return v ? v.toFixed(2) : L.t('off'); });
    slider('repetition', L.t('repetition penalty'), 1, 2, 0.05, 1, function (v) { return v > 1 ? v.toFixed(2) : L.t('off'); });
    // a seed: the same seed and settings write the same text again; left empty, each run draws anew
    var seed = L.el('input', {type: 'number', min: 0, step: 1, 'data-name': 'writer-seed', placeholder: L.t('new each time')});
    controls.appendChild(L.labelled(L.t('seed'), seed));
    box.appendChild(controls);
    var write = L.el('button', {type: 'button', 'data-action': opts.chat ? 'ask' : 'write'}, opts.chat ? L.t('Ask') : L.t('Write'));
    var stop = L.el('button', {type: 'button', 'data-action': 'stop', disabled: 'disabled'}, L.t('Stop'));
    box.appendChild(write);
    box.appendChild(stop);
    var out = L.el('div', {'class': 'llmlab-written', 'aria-live': 'polite'});
    var status = L.el('div', {'class': 'llmlab-live-status', role: 'status'},
      L.t('Up to {n} new tokens; the text and what it writes may be up to 1,024 tokens. ' +
          'Each token is shaded by the probability it was drawn with; hover it for the number.', {n: opts.maxNewTokens || 60}));
    box.appendChild(out);
    box.appendChild(status);
    var controller = null;
    write.addEventListener('click', function () {
      var t = parseFloat(sliders.temperature.value), k = parseInt(sliders.top_k.value, 10);
      var p = parseFloat(sliders.top_p.value), mp = parseFloat(sliders.min_p.value);
      var rp = parseFloat(sliders.repetition.value), s = seed.value.trim() === '' ? null : Number(seed.value);
      L.clear(out);
      if (!opts.chat) out.appendChild(L.el('span', {'class': 'llmlab-written-prompt'}, input.value));
      controller = new AbortController();
      write.disabled = true;
      stop.disabled = false;
      status.textContent = L.t('Loading the model ...');
      L.loadLive(staticRoot).then(function (live) {
        status.textContent = L.t('Writing ...');
        return live.generate(input.value, {maxNewTokens: opts.maxNewTokens || 60, temperature: t, topK: k || null,
          topP: p >= 1 ? null : p, minP: mp || null, repetitionPenalty: rp > 1 ? rp : null, seed: s,
          chat: !!opts.chat, signal: controller.signal,
          onToken: function (tok) {
            if (!tok.text) return;
            var span = L.el('span', {'class': 'llmlab-written-token', title: L.t('{token}: p = {p} (model: {model})',
              {token: tok.token, p: tok.p.toFixed(3), model: tok.pModel.toFixed(3)})}, tok.text);
            span.style.background = 'rgba(31,119,180,' + (0.08 + 0.5 * tok.p).toFixed(3) + ')';
            out.appendChild(span);
            status.textContent = L.t('Writing ... token {k}, {ms} ms', {k: tok.index + 1, ms: Math.round(tok.ms)});
          }});
      }).then(function (g) {
        var tm = g.timings;
        status.textContent = (g.stopped === 'aborted' ? L.t('Stopped. ') : g.stopped === 'eos' ? L.t('Done (end of text). ') : L.t('Done. ')) +
          L.t('{n} tokens; prompt {prompt} tokens in {ms} ms', {n: g.ids.length, prompt: tm.prompt_tokens, ms: Math.round(tm.prefill_ms)}) +
          (tm.ms_per_token ? L.t(', then {ms} ms per token ({rate} tokens/s)', {ms: Math.round(tm.ms_per_token), rate: tm.tokens_per_s.toFixed(1)}) : '') + L.t('.');
      }).catch(function (error) {
        status.textContent = L.message(error);
      }).then(function () {
        write.disabled = false;
        stop.disabled = true;
      });
    });
    stop.addEventListener('click', function () { if (controller) controller.abort(); stop.disabled = true; });
    return box;
  };
  // The sampling view in the built book: below it, "Write" with its sliders, and a chat box.
  L.liveExtras.sampling = function (root, data, staticRoot) {
    root.appendChild(L.writer(staticRoot, {prompt: data.live && data.live.prompt, temperature: data.temperature,
                                           top_k: data.top_k, top_p: data.top_p}));
    root.appendChild(L.writer(staticRoot, {chat: true}));
  };

  // ---------------------------------------------------------------- "what if": knock-outs and steering
  function promptOf(root) {
    var input = root.querySelector('[data-name="live-prompt"]');
    return input ? input.value : '';
  }
  // A result shown as labelled lines, one above the other, each keeping its own line breaks:
  // rows are [label, text] (a text of null: the label alone, a sentence).
  function compare(out, rows) {
    L.clear(out);
    rows.forEach(function (row) {
      var line = L.el('div', {'class': 'llmlab-compare'});
      line.appendChild(L.el('div', {'class': 'llmlab-compare-label'}, row[0]));
      if (row[1] !== null) line.appendChild(L.el('div', {'class': 'llmlab-written', 'data-name': 'compare-text'}, row[1]));
      out.appendChild(line);
    });
  }
  function topLines(next, n) {
    return next.slice(0, n).map(function (t) { return t.token + ' ' + t.p.toFixed(3); }).join(L.t(', '));
  }
  // Below the attention view: knock out heads (block.head, e.g. "5.6 12.3") and compare the next token.
  L.liveExtras.attention = function (root, data, staticRoot) {
    var box = L.el('div', {'class': 'llmlab-writer', 'data-writer': 'ablate'});
    box.appendChild(L.el('div', {'class': 'llmlab-title'},
      L.t('Knock out heads: which heads does the next token need? (live, on the prompt above)')));
    var heads = L.el('input', {type: 'text', 'data-name': 'ablate-heads', 'aria-label': L.t('heads to knock out, as block.head'),
      placeholder: L.t('blocks and heads, e.g. 5.6 12.3')});
    var go = L.el('button', {type: 'button', 'data-action': 'ablate'}, L.t('Knock out and compare'));
    var out = L.el('div', {'class': 'llmlab-live-status', role: 'status', 'aria-live': 'polite'},
      L.t('Click heads of the block shown above (or type them as block.head: blocks 0-29, heads 0-8); their outputs are zeroed, as llmlab.inspection.ablate does.'));
    // One button per head of the block the view shows: a plain click adds "block.head" to the list or takes it out.
    var row = L.el('div', {'class': 'llmlab-head-buttons', role: 'group', 'aria-label': L.t('heads of this block to knock out')});
    var rowLabel = L.el('span', {}, '');
    row.appendChild(rowLabel);
    var buttons = [];
    for (var h = 0; h < 9; h++) {
      var b = L.el('button', {type: 'button', 'data-head': h, 'aria-pressed': 'false'}, String(h));
      b.addEventListener('click', toggle.bind(null, h));
      buttons.push(b);
      row.appendChild(b);
    }
    function currentBlock() {      // the number in the block selector's chosen option ("block 12" -> 12)
      var sel = root.querySelector('.llmlab-controls select');
      var m = sel && sel.options[sel.selectedIndex] ? /(\d+)\s*$/.exec(sel.options[sel.selectedIndex].text) : null;
      return m ? parseInt(m[1], 10) : 0;
    }
    function listed() { return heads.value.split(/[\s,;]+/).filter(Boolean); }
    function refresh() {
      var block = currentBlock(), now = listed();
      rowLabel.textContent = L.t('block {block}, head: ', {block: block});
      buttons.forEach(function (button, h) { button.setAttribute('aria-pressed', now.indexOf(block + '.' + h) >= 0 ? 'true' : 'false'); });
    }
    function toggle(h) {
      var name = currentBlock() + '.' + h, now = listed(), at = now.indexOf(name);
      if (at >= 0) now.splice(at, 1); else now.push(name);
      heads.value = now.join(' ');
      refresh();
    }
    box.appendChild(row);
    box.appendChild(L.labelled(L.t('heads'), heads));
    box.appendChild(go);
    box.appendChild(out);
    root.appendChild(box);
    refresh();
    root.addEventListener('change', refresh);      // another block chosen above
    heads.addEventListener('input', refresh);
    go.addEventListener('click', function () {
      var pairs = [], bad = [];
      heads.value.split(/[\s,;]+/).filter(Boolean).forEach(function (t) {
        var m = /^(\d+)\.(\d+)$/.exec(t);
        if (m) pairs.push([parseInt(m[1], 10), parseInt(m[2], 10)]); else bad.push(t);
      });
      if (bad.length || !pairs.length) {
        out.textContent = bad.length ? L.t('Write each head as block.head, e.g. 5.6; got {got}.', {got: JSON.stringify(bad.join(' '))})
                                     : L.t('Type at least one head, e.g. 5.6 (block 5, head 6).');
        return;
      }
      go.disabled = true;
      out.textContent = L.t('Running twice: as it is, and with {n} head(s) knocked out ...', {n: pairs.length});
      var prompt = promptOf(root);
      L.loadLive(staticRoot).then(function (live) {
        return live.run(prompt, {attention: false}).then(function (plain) {
          return live.run(prompt, {attention: false, ablate: pairs}).then(function (ko) { return [plain, ko]; });
        });
      }).then(function (both) {
        var top = both[0].next[0], after = both[1].next.filter(function (t) { return t.id === top.id; })[0];
        compare(out, [[L.t('As it is:'), topLines(both[0].next, 5)],
          [L.t('Knocked out ({heads}):', {heads: pairs.map(function (p) { return p.join('.'); }).join(' ')}), topLines(both[1].next, 5)],
          [L.t('"{token}" goes from {from} to {to}.', {token: top.token, from: top.p.toFixed(3),
                                                       to: after ? after.p.toFixed(3) : L.t('below the top 20')}), null]]);
      }).catch(function (error) { out.textContent = L.message(error); })
        .then(function () { go.disabled = false; });
    });
  };

  // A steering panel: the view's own direction (data.live.steer) or one built from two lists of prompts
  // (difference of means of the last token's residual stream after a block), then the same prompt
  // written with and without it.
  L.steerer = function (root, data, staticRoot) {
    var own = data.live && data.live.steer;
    var box = L.el('div', {'class': 'llmlab-writer', 'data-writer': 'steer'});
    box.appendChild(L.el('div', {'class': 'llmlab-title'}, L.t('Steer the live model: add a direction and let it write')));
    var which = L.select(own ? [L.t("this view's direction"), L.t('my own, from two lists of prompts')] : [L.t('my own, from two lists of prompts')],
                         0, function () { lists.hidden = own && which.value === '0'; });
    box.appendChild(L.labelled(L.t('direction'), which));
    var lists = L.el('div', {'class': 'llmlab-controls'});
    var pos = L.el('textarea', {'data-name': 'steer-positive', rows: 3, 'aria-label': L.t('prompts with the property, one per line')});
    pos.value = 'I walked along the beach\nThe waves of the ocean\nA ship sailed on the sea';   // model input: kept in English
    var neg = L.el('textarea', {'data-name': 'steer-negative', rows: 3, 'aria-label': L.t('prompts without it, one per line')});
    neg.value = 'I walked along the road\nThe streets of the city\nA car drove on the highway';
    lists.appendChild(L.labelled(L.t('with'), pos));
    lists.appendChild(L.labelled(L.t('without'), neg));
    lists.hidden = !!own;
    box.appendChild(lists);
    var layer = L.el('input', {type: 'number', min: 0, max: 29, step: 1, 'data-name': 'steer-layer'});
    layer.value = own ? own.layer : 12;
    var scale = L.el('input', {type: 'number', step: 0.5, 'data-name': 'steer-scale'});
    scale.value = own ? own.scale : 4;
    var prompt = L.el('input', {type: 'text', 'data-name': 'steer-prompt', 'aria-label': L.t('the prompt to continue')});
    prompt.value = 'My favourite place to spend the day is';    // model input: kept in English
    box.appendChild(L.labelled(L.t('after block'), layer));
    box.appendChild(L.labelled(L.t('scale'), scale));
    box.appendChild(L.labelled(L.t('prompt'), prompt));
    var go = L.el('button', {type: 'button', 'data-action': 'steer'}, L.t('Write with and without'));
    box.appendChild(go);
    var out = L.el('div', {'class': 'llmlab-live-status', role: 'status', 'aria-live': 'polite'},
      L.t('Greedy, 20 tokens each: the same prompt as it is, then with scale x the direction added after the block at every position.'));
    box.appendChild(out);
    go.addEventListener('click', function () {
      go.disabled = true;
      out.textContent = L.t('Working ...');
      var l = Number(layer.value), sc = Number(scale.value);
      L.loadLive(staticRoot).then(function (live) {
        var vector = own && which.value === '0' ? Promise.resolve(own.vector) : live.steeringVector(
          pos.value.split('\n').filter(function (x) { return x.trim(); }),
          neg.value.split('\n').filter(function (x) { return x.trim(); }), l);
        return vector.then(function (v) {
          return live.generate(prompt.value, {maxNewTokens: 20}).then(function (plain) {
            return live.generate(prompt.value, {maxNewTokens: 20, steer: {layer: l, vector: v, scale: sc}})
              .then(function (steered) { return [plain, steered]; });
          });
        });
      }).then(function (both) {
        compare(out, [[L.t('As it is:'), prompt.value + both[0].text],
                      [L.t('Steered (block {block}, scale {scale}):', {block: l, scale: sc}), prompt.value + both[1].text]]);
      }).catch(function (error) { out.textContent = L.message(error); })
        .then(function () { go.disabled = false; });
    });
    root.appendChild(box);
  };
  // The lens view of a steered model (chapter 16) gets the steering panel.
  L.liveExtras.lens = function (root, data, staticRoot) {
    if (data.live && data.live.steer) L.steerer(root, data, staticRoot);
  };
})(window.llmlab);
