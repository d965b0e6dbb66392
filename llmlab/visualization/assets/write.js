// The live model writing (the built book only): "write" and "chat" use L.writer (common.js); "cache"
// writes the same greedy continuation with and without the KV cache and plots each token's time as
// the text grows, with the cache's size in bytes.
// data: {mode: 'write'|'chat'|'cache', prompt, max_new_tokens, temperature, top_k, top_p, min_p}
window.llmlab.views.write = function (root, data) {
  var L = window.llmlab, staticRoot = L.liveRoot();
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  if (!staticRoot) {
    root.appendChild(L.el('div', {'class': 'llmlab-note'},
      L.t('In the built book, this box lets SmolLM2-135M write in your browser. In Python, use llmlab.generate.')));
    return;
  }
  if (data.mode !== 'cache') {
    root.appendChild(L.writer(staticRoot, {chat: data.mode === 'chat', prompt: data.prompt, maxNewTokens: data.max_new_tokens,
      temperature: data.temperature, top_k: data.top_k, top_p: data.top_p, min_p: data.min_p}));
    return;
  }
  var input = L.el('input', {type: 'text', 'class': 'llmlab-live-prompt', 'data-name': 'cache-prompt', 'aria-label': L.t('the text to continue')});
  input.value = data.prompt;
  root.appendChild(input);
  var go = L.el('button', {type: 'button', 'data-action': 'race'}, L.t('Write with and without the cache'));
  var stop = L.el('button', {type: 'button', 'data-action': 'stop', disabled: 'disabled'}, L.t('Stop'));
  root.appendChild(go);
  root.appendChild(stop);
  var n = data.max_new_tokens;
  var status = L.el('div', {'class': 'llmlab-live-status', role: 'status', 'aria-live': 'polite'},
    L.t('Greedy, {n} tokens, twice: with the cache each new token is one token of work; without it the whole text ' +
        'is computed again for every token.', {n: n}));
  root.appendChild(status);
  var W = 560, Hh = 220, pad = 40, svgNS = 'http://www.w3.org/2000/svg';
  var svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + Hh);
  svg.setAttribute('class', 'llmlab-cache-plot');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', L.t('milliseconds per token as the text grows, with and without the cache'));
  svg.style.width = '100%';
  svg.style.maxWidth = W + 'px';
  root.appendChild(svg);
  var table = L.el('div', {'class': 'llmlab-note', 'data-name': 'cache-numbers'});
  root.appendChild(table);
  var series = {cache: [], plain: []}, bytes = [];
  function line(x1, y1, x2, y2, colour) {
    var l = document.createElementNS(svgNS, 'line');
    [['x1', x1], ['y1', y1], ['x2', x2], ['y2', y2]].forEach(function (a) { l.setAttribute(a[0], a[1]); });
    l.setAttribute('stroke', colour);
    svg.appendChild(l);
  }
  function text(x, y, s, anchor) {
    var t = document.createElementNS(svgNS, 'text');
    t.setAttribute('x', x); t.setAttribute('y', y); t.setAttribute('font-size', '11');
    if (anchor) t.setAttribute('text-anchor', anchor);
    t.textContent = s;
    svg.appendChild(t);
  }
  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var all = series.cache.concat(series.plain), max = Math.max.apply(null, all.concat([1]));
    line(pad, Hh - pad, W - 10, Hh - pad, '#999');
    line(pad, 10, pad, Hh - pad, '#999');
    text(pad - 4, 14, Math.round(max) + ' ms', 'end');
    text(pad - 4, Hh - pad, '0', 'end');
    text((W + pad) / 2, Hh - 8, L.t('token written (the text grows to the right)'), 'middle');
    [['plain', '#d62728', L.t('without the cache')], ['cache', '#1f77b4', L.t('with the cache')]].forEach(function (s, k) {
      var pts = series[s[0]];
      for (var i = 1; i < pts.length; i++) {
        line(pad + (i - 1) / (n - 1) * (W - pad - 10), Hh - pad - pts[i - 1] / max * (Hh - pad - 10),
             pad + i / (n - 1) * (W - pad - 10), Hh - pad - pts[i] / max * (Hh - pad - 10), s[1]);
      }
      text(W - 12, 24 + 14 * k, s[2], 'end');
      line(W - 150, 20 + 14 * k, W - 140, 20 + 14 * k, s[1]);
    });
  }
  function mean(xs) { return xs.length ? xs.reduce(function (a, b) { return a + b; }, 0) / xs.length : 0; }
  var controller = null;
  go.addEventListener('click', function () {
    series = {cache: [], plain: []};
    bytes = [];
    draw();
    go.disabled = true;
    stop.disabled = false;
    controller = new AbortController();
    status.textContent = L.t('Loading the model ...');
    L.loadLive(staticRoot).then(function (live) {
      function write(cache) {
        status.textContent = cache ? L.t('Writing with the cache ...') : L.t('Writing without the cache ...');
        return live.generate(input.value, {maxNewTokens: n, cache: cache, signal: controller.signal, onToken: function (t) {
          if (t.index === 0) return;                       // the prompt's pass, not a decode step
          series[cache ? 'cache' : 'plain'].push(t.ms);
          if (cache) bytes.push(t.cacheBytes);
          draw();
        }});
      }
      return write(true).then(function (a) { return write(false).then(function (b) { return [a, b]; }); });
    }).then(function (r) {
      var a = r[0], b = r[1];
      status.textContent = r[0].text === r[1].text ? L.t('The same text both ways: "{text}"', {text: input.value + a.text})
                                                   : L.t('Stopped.');
      table.textContent = L.t('With the cache: {cache} ms per token; without: {plain} ms per token (prompt: {prompt} tokens, ' +
        '{prefill} ms). The cache holds {kib} KiB at the end: keys and values, 30 blocks x 3 key-value heads x 64 numbers x 4 bytes, twice, per token.',
        {cache: Math.round(mean(series.cache)), plain: Math.round(mean(series.plain)), prompt: a.timings.prompt_tokens,
         prefill: Math.round(a.timings.prefill_ms), kib: bytes.length ? L.fmt(bytes[bytes.length - 1] / 1024) : 0});
      table.setAttribute('data-cache-ms', String(mean(series.cache)));
      table.setAttribute('data-plain-ms', String(mean(series.plain)));
    }).catch(function (error) { status.textContent = L.message(error); })
      .then(function () { go.disabled = false; stop.disabled = true; });
  });
  stop.addEventListener('click', function () { if (controller) controller.abort(); });
};
