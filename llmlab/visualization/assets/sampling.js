// Temperature / top-k / top-p explorer over precomputed next-token logits. The sliders only
// re-run softmax(logits / temperature) and the filters in the browser; no model is needed.
// data: {prompts: [str], candidates: [[str]], logits: [[float]], temperature, top_k, top_p}
window.llmlab.views.sampling = function (root, data) {
  var L = window.llmlab, prompt = 0;
  var state = {temperature: data.temperature || 1.0, top_k: data.top_k || 0, top_p: data.top_p || 1.0};
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  if (data.prompts.length > 1) {
    controls.appendChild(L.labelled('prompt', L.select(data.prompts, 0, function (v) { prompt = v; paint(); })));
  }
  function slider(name, min, max, step, value) {
    var input = L.el('input', {type: 'range', min: min, max: max, step: step, value: value, 'data-name': name});
    var shown = L.el('span', {'class': 'llmlab-slider-value'});
    input.addEventListener('input', function () { state[name] = parseFloat(input.value); paint(); });
    var label = L.labelled(name, input);
    label.appendChild(shown);
    controls.appendChild(label);
    return shown;
  }
  var n = data.candidates[0].length;
  var shownT = slider('temperature', 0, 2.5, 0.05, state.temperature);
  var shownK = slider('top_k', 0, n, 1, state.top_k);
  var shownP = slider('top_p', 0.05, 1, 0.05, state.top_p);
  root.appendChild(controls);
  var title = L.el('div', {'class': 'llmlab-readout'});
  var bars = L.el('div', {'class': 'llmlab-bars'});
  root.appendChild(title);
  root.appendChild(bars);

  // probabilities over the candidates after temperature, top-k and top-p (as llmlab.sampling does)
  function distribution(logits) {
    var order = logits.map(function (_, i) { return i; }).sort(function (a, b) { return logits[b] - logits[a]; });
    var keep = logits.map(function () { return true; });
    var probs;
    if (state.temperature <= 0) {  // greedy: all mass on the top token
      probs = logits.map(function (_, i) { return i === order[0] ? 1 : 0; });
      return {probs: probs, keep: probs.map(function (p) { return p > 0; })};
    }
    if (state.top_k > 0 && state.top_k < logits.length) {  // ties with the k-th are kept, as in top_k_filter
      var kth = logits[order[state.top_k - 1]];
      logits.forEach(function (x, i) { if (x < kth) keep[i] = false; });
    }
    var max = logits[order[0]];
    function softmax() {
      var e = logits.map(function (x, i) { return keep[i] ? Math.exp((x - max) / state.temperature) : 0; });
      var s = e.reduce(function (a, b) { return a + b; }, 0);
      return e.map(function (x) { return x / s; });
    }
    probs = softmax();
    if (state.top_p < 1) {
      var cum = 0;
      order.forEach(function (i) {
        if (!keep[i]) return;
        if (cum >= state.top_p) keep[i] = false;
        cum += probs[i];
      });
      probs = softmax();
    }
    return {probs: probs, keep: keep};
  }

  function paint() {
    shownT.textContent = state.temperature <= 0 ? '0 (greedy)' : state.temperature.toFixed(2);
    shownK.textContent = state.top_k > 0 ? String(state.top_k) : 'off';
    shownP.textContent = state.top_p >= 1 ? 'off' : state.top_p.toFixed(2);
    var d = distribution(data.logits[prompt]);
    var kept = d.keep.filter(function (k) { return k; }).length;
    title.textContent = '"' + data.prompts[prompt] + '" → next token (' + kept + ' of ' + n + ' candidates can be drawn)';
    L.clear(bars);
    data.candidates[prompt].forEach(function (tok, i) {
      var row = L.el('div', {'class': 'llmlab-bar-row'});
      row.appendChild(L.el('span', {'class': 'llmlab-bar-label'}, tok));
      var bar = L.el('span', {'class': 'llmlab-bar' + (d.keep[i] ? '' : ' llmlab-off')});
      bar.style.width = Math.max(1, Math.round(d.probs[i] * 400)) + 'px';
      row.appendChild(bar);
      row.appendChild(L.el('span', {'class': 'llmlab-bar-value'}, d.probs[i].toFixed(3)));
      bars.appendChild(row);
    });
  }
  paint();
};
