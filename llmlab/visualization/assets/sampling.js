// Temperature / top-k / top-p explorer over precomputed next-token logits. The sliders re-run
// softmax(logits / temperature) and the filters in the browser; no model is needed.
//
// The page keeps, per prompt, the exact logits (and texts) of the most likely tokens, a histogram
// of the logits of the rest of the vocabulary, and log-sum-exp(logits / T) over the whole
// vocabulary for every temperature of the slider. So the bars are the real probabilities, the
// "all other tokens" bar is the real remaining mass, and top-k / top-p cut the real vocabulary
// (as llmlab.sampling does: top-k first, then top-p on what is left).
// data: {prompts, candidates: [[str]], logits: [[float]], temperature, top_k, top_p, t_step, t_max,
//        tails: [{vocab, hist_top, hist_width, hist_counts,
//                 lse: [per grid temperature T: log sum exp((z - z_top) / T) over the whole vocabulary]}] | absent,
//        extra: [{tokens: [str], logits: [float]}] | absent}
window.llmlab.views.sampling = function (root, data) {
  var L = window.llmlab, prompt = 0;
  var state = {temperature: data.temperature === undefined ? 1.0 : data.temperature, top_k: data.top_k || 0,
               top_p: data.top_p || 1.0};
  var n = data.candidates[0].length, full = !!data.tails;
  var vocab = full ? data.tails[0].vocab : n;

  // the exact part (ranked) and the histogram part of each prompt's vocabulary
  function model(p) {
    var z = data.logits[p].slice(), names = data.candidates[p].slice();
    if (full) {
      z = z.concat(data.extra[p].logits);
      names = names.concat(data.extra[p].tokens);
    }
    var tail = full ? data.tails[p] : {hist_counts: [], lse: null, vocab: n, hist_top: 0, hist_width: 1};
    var bins = tail.hist_counts.map(function (c, b) { return {count: c, z: tail.hist_top - (b + 0.5) * tail.hist_width}; });
    return {z: z, names: names, bins: bins, lse: tail.lse, vocab: tail.vocab};
  }
  var models = data.prompts.map(function (_, p) { return model(p); });

  // the kept tokens after temperature, top-k and top-p, as runs of (rank start, count, weight per token)
  function distribution(m) {
    var T = state.temperature, runs = [], E = m.z.length, z0 = m.z[0];
    if (T <= 0) return {runs: [{start: 0, count: 1, w: 1}], total: 1, kept: 1};
    var k = state.top_k > 0 && state.top_k < m.vocab ? state.top_k : m.vocab;
    var kth = k <= E ? m.z[k - 1] : null;
    for (var r = 0; r < E; r++) {
      if (kth !== null ? m.z[r] < kth : r >= k) break;
      runs.push({start: r, count: 1, w: Math.exp((m.z[r] - z0) / T)});
    }
    var rank = E, left = k - E;
    if (kth === null) {
      for (var b = 0; b < m.bins.length && left > 0; b++) {
        var c = Math.min(m.bins[b].count, left);
        if (c > 0) runs.push({start: rank, count: c, w: Math.exp((m.bins[b].z - z0) / T)});
        rank += m.bins[b].count;
        left -= c;
      }
    }
    var total = 0;
    runs.forEach(function (run) { total += run.count * run.w; });
    var unfiltered = k === m.vocab && state.top_p >= 1;
    var grid = Math.round(T / data.t_step);
    if (unfiltered && m.lse && Math.abs(grid * data.t_step - T) < 1e-6 && grid >= 1 && grid <= m.lse.length) {
      total = Math.exp(m.lse[grid - 1]);                 // exact full-vocabulary sum at this temperature
      if (total < 1) total = 1;                          // (the top token's own weight is 1: no p above 1)
    }
    if (state.top_p < 1) {                               // nucleus over the top-k distribution
      var before = 0, kept = [];
      for (var i = 0; i < runs.length && before < state.top_p; i++) {
        var run = runs[i], q = run.w / total;
        var take = Math.min(run.count, Math.max(1, Math.ceil((state.top_p - before) / q - 1e-9)));
        kept.push({start: run.start, count: take, w: run.w});
        before += take * q;
      }
      runs = kept;
      total = 0;
      runs.forEach(function (run) { total += run.count * run.w; });
    }
    var count = 0;
    runs.forEach(function (run) { count += run.count; });
    return {runs: runs, total: total, kept: count};
  }
  // probability of each shown candidate, and the rest
  function shares(m, d) {
    var probs = [], keep = [], shown = 0;
    for (var r = 0; r < n; r++) { probs.push(0); keep.push(false); }
    d.runs.forEach(function (run) {
      if (run.start < n) { probs[run.start] = run.w / d.total; keep[run.start] = true; shown += run.w / d.total; }
    });
    return {probs: probs, keep: keep, other: Math.max(0, 1 - shown)};
  }

  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  if (data.prompts.length > 1) {
    controls.appendChild(L.labelled(L.t('prompt'), L.select(data.prompts, 0, function (v) { prompt = v; resetSamples(); paint(); })));
  }
  // top-k slider positions: off, 1..n, then a few larger k (the real vocabulary is cut, not the bars)
  var kValues = [0];
  for (var i = 1; i <= n; i++) kValues.push(i);
  if (full) [50, 100, 200, 500, 1000, 2000, 5000, 10000].forEach(function (v) { if (v > n && v < vocab) kValues.push(v); });
  function slider(name, min, max, step, value, onInput) {
    var input = L.el('input', {type: 'range', min: min, max: max, step: step, value: value, 'data-name': name,
                               'aria-label': L.t(name)});
    var shown = L.el('span', {'class': 'llmlab-slider-value'});
    input.addEventListener('input', function () { onInput(parseFloat(input.value)); resetSamples(); paint(); });
    var label = L.labelled(L.t(name), input);
    label.appendChild(shown);
    controls.appendChild(label);
    return shown;
  }
  var shownT = slider('temperature', 0, data.t_max || 2.5, data.t_step || 0.05, state.temperature,
    function (v) { state.temperature = v; });
  var kIndex = Math.max(0, kValues.indexOf(state.top_k));
  var shownK = slider('top_k', 0, kValues.length - 1, 1, kIndex, function (v) { state.top_k = kValues[v]; });
  var shownP = slider('top_p', 0.05, 1, 0.01, state.top_p, function (v) { state.top_p = v; });
  var draw = L.el('button', {type: 'button', 'data-action': 'sample'}, L.t('draw 10 samples'));
  controls.appendChild(draw);
  root.appendChild(controls);
  var title = L.readout(3);
  var bars = L.el('div', {'class': 'llmlab-bars', role: 'list'});
  var samples = L.el('div', {'class': 'llmlab-samples', 'aria-live': 'polite'});
  // samples belong to the settings they were drawn with: a change of settings clears them
  function resetSamples() {
    L.clear(samples);
    samples.textContent = L.t('Press "draw 10 samples" to sample from the distribution as it is set now.');
  }
  resetSamples();
  root.appendChild(title);
  var allShown = [];
  data.candidates.forEach(function (c) { allShown = allShown.concat(c); });
  var key = L.tokenKey(allShown);
  if (key) root.appendChild(key);
  root.appendChild(bars);
  root.appendChild(samples);

  function bar(label, p, on, extraClass, ariaLabel) {
    var row = L.el('div', {'class': 'llmlab-bar-row' + (extraClass || ''), role: 'listitem', 'aria-label': ariaLabel});
    row.appendChild(L.el('span', {'class': 'llmlab-bar-label'}, label));
    var track = L.el('span', {'class': 'llmlab-bar-track'});
    var b = L.el('span', {'class': 'llmlab-bar' + (on ? '' : ' llmlab-off')});
    b.style.width = (100 * p).toFixed(2) + '%';
    track.appendChild(b);
    row.appendChild(track);
    row.appendChild(L.el('span', {'class': 'llmlab-bar-value'}, p.toFixed(3)));
    bars.appendChild(row);
  }
  var current = null;
  function paint() {
    shownT.textContent = state.temperature <= 0 ? L.t('0 (greedy)') : state.temperature.toFixed(2);
    shownK.textContent = state.top_k > 0 ? L.fmt(state.top_k) : L.t('off');
    shownP.textContent = state.top_p >= 1 ? L.t('off') : state.top_p.toFixed(2);
    var m = models[prompt], d = distribution(m), s = shares(m, d);
    current = {m: m, d: d};
    title.textContent = L.t('"{prompt}" → next token\n{kept} of {vocab} tokens can be drawn',
                            {prompt: data.prompts[prompt], kept: L.fmt(d.kept), vocab: L.fmt(m.vocab)}) +
      (full ? L.t('; the {n} shown hold {share}%', {n: n, share: (100 * (1 - s.other)).toFixed(1)}) : '');
    L.clear(bars);
    data.candidates[prompt].forEach(function (tok, r) {
      bar(tok, s.probs[r], s.keep[r], '', tok + ': ' + s.probs[r].toFixed(3));
    });
    if (full) {
      var rest = m.vocab - n;
      bar(L.t('all other {n} tokens', {n: L.fmt(rest)}), s.other, s.other > 0, ' llmlab-other',
        L.t('all other {n} tokens together: {p}', {n: L.fmt(rest), p: s.other.toFixed(3)}));
    }
  }
  function sampleOne() {
    var d = current.d, m = current.m, u = L.random() * d.total;
    for (var i = 0; i < d.runs.length; i++) {
      var run = d.runs[i], mass = run.count * run.w;
      if (u < mass || i === d.runs.length - 1) {
        var rank = run.start + Math.min(run.count - 1, Math.floor(u / run.w));
        return rank;
      }
      u -= mass;
    }
    return 0;
  }
  draw.addEventListener('click', function () {
    L.clear(samples);
    var ranks = [];
    for (var s = 0; s < 10; s++) ranks.push(sampleOne());
    var outside = ranks.filter(function (r) { return r >= n; }).length;
    samples.appendChild(L.el('div', {'class': 'llmlab-note'}, L.t('10 samples at temperature {t}: {outside} of 10 from outside the {n} shown',
      {t: state.temperature <= 0 ? '0' : state.temperature.toFixed(2), outside: outside, n: n}) +
      (ranks.some(function (r) { return r >= current.m.names.length; })
        ? L.t(' ("rare token, rank N": one of the {n} least likely tokens, whose text this page does not keep; "Run live" shows every token)',
              {n: L.fmt(current.m.vocab - current.m.names.length)}) : '')));
    ranks.forEach(function (r) {
      var known = r < current.m.names.length;
      samples.appendChild(L.el('span', {'class': 'llmlab-sample' + (r >= n ? ' llmlab-other' : ''), 'data-rank': r,
        title: known ? L.t('rank {rank}', {rank: L.fmt(r + 1)}) : L.t('the token ranked {rank} (the page keeps the text of the {n} most likely tokens only)',
          {rank: L.fmt(r + 1), n: L.fmt(current.m.names.length)})},
        known ? current.m.names[r] : L.t('rare token, rank {rank}', {rank: L.fmt(r + 1)})));
    });
  });
  paint();
};

// The live model's result as this view's data: the whole vocabulary is known here, so every token
// keeps its exact logit and text (no histogram), and log-sum-exp is computed for every temperature.
window.llmlab.liveData.sampling = function (r, data) {
  var z = r.logits, V = z.length, n = data.candidates[0].length, order = new Array(V);
  for (var i = 0; i < V; i++) order[i] = i;
  order.sort(function (a, b) { return z[b] - z[a] || a - b; });
  var sorted = order.map(function (i) { return z[i]; }), names = order.map(function (i) { return window.llmlabLive.token(i); });
  var lse = [], steps = Math.round((data.t_max || 2.5) / (data.t_step || 0.05));
  for (var g = 1; g <= steps; g++) {
    var T = g * (data.t_step || 0.05), s = 0;
    for (var k = 0; k < V; k++) s += Math.exp((sorted[k] - sorted[0]) / T);
    lse.push(Math.log(s));
  }
  return {prompts: [r.prompt], candidates: [names.slice(0, n)], logits: [sorted.slice(0, n)],
          temperature: data.temperature, top_k: data.top_k, top_p: data.top_p, t_step: data.t_step, t_max: data.t_max,
          tails: [{vocab: V, hist_top: 0, hist_width: 1, hist_counts: [], lse: lse}],
          extra: [{tokens: names.slice(n), logits: sorted.slice(n)}], live: data.live,
          title: window.llmlab.t('SmolLM2-135M, live in your browser: the next token after your prompt')};
};

// What the reader has set in the view now: temperature, top-k and top-p carry over to the live view.
window.llmlab.liveSettings.sampling = function (node) {
  var out = {}, t = node.querySelector('input[data-name="temperature"]'), p = node.querySelector('input[data-name="top_p"]');
  var k = node.querySelector('input[data-name="top_k"]'), shownK = k && k.parentNode.querySelector('.llmlab-slider-value');
  if (t) out.temperature = parseFloat(t.value);
  if (p) out.top_p = parseFloat(p.value);
  if (shownK) out.top_k = shownK.textContent === window.llmlab.t('off') ? 0 : parseInt(shownK.textContent.replace(/,/g, ''), 10);
  return out;
};
