// Logit-lens table: rows are layers, columns are positions; each cell shows the top token of
// that layer's residual stream read through the final norm and the unembedding, shaded by its
// probability. Hover, tap or arrow to a cell for the top-k list; click or Enter pins it.
// The readout has a fixed height and the table scrolls in its own box (sticky header row and
// layer column), so the readout stays in sight next to the last layers.
// data: {positions: [str], layers: [str], top_tokens: [L][T][k], top_probs: [L][T][k],
//        target: str|null, target_rank: [L][T]|null, target_prob: [L][T]|null}
window.llmlab.views.lens = function (root, data) {
  var L = window.llmlab, T = data.positions.length, NL = data.layers.length;
  data = Object.assign({}, data, {positions: L.readableTokens(data.positions)});   // byte pieces named by their character
  var k = data.top_tokens.length ? data.top_tokens[0][0].length : 0;
  var hasTarget = data.target !== null && data.target !== undefined && data.target_rank;
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var layerNames = data.layers.map(L.layerName);
  root.appendChild(L.legend({label: L.t('top-1 probability'), min: 0, max: 1}));
  if (hasTarget) {
    var best = Infinity;
    data.target_rank.forEach(function (row) { row.forEach(function (r) { best = Math.min(best, r); }); });
    root.appendChild(L.el('div', {'class': 'llmlab-note'}, best === 0
      ? L.t('underlined: "{target}" is the top token', {target: data.target})
      : L.t('"{target}" is never the top token here (its best rank is {rank}); hover a cell for its rank', {target: data.target, rank: best + 1})));
  }
  var tokens = [];
  data.top_tokens.forEach(function (row) { row.forEach(function (cell) { tokens.push(cell[0]); }); });
  var key = L.tokenKey(tokens.concat(data.positions));
  if (key) root.appendChild(key);
  var readout = L.readout(k + 1 + (hasTarget ? 1 : 0),
    L.t('Hover, tap or arrow to a cell to see the top tokens at that block and position; click or Enter pins it.'));
  root.appendChild(readout);
  var grid = L.grid({
    rows: layerNames, cols: data.positions, corner: L.t('block \\ token'), className: 'llmlab-lens',
    label: L.t('logit lens, rows are blocks, columns are positions'),
    text: function (l, t) { return data.top_tokens[l][t][0]; },
    aria: function (l, t) {
      return L.t('{layer}, position {t} {token}: top token {top}, probability {p}', {layer: layerNames[l], t: t,
        token: data.positions[t], top: data.top_tokens[l][t][0], p: data.top_probs[l][t][0].toFixed(3)});
    },
    show: function (l, t, pinned) {
      var lines = [L.t('{layer} · position {t} "{token}"', {layer: layerNames[l], t: t, token: data.positions[t]}) + (pinned ? L.t(' [pinned]') : '')];
      data.top_tokens[l][t].forEach(function (tok, r) {
        var p = data.top_probs[l][t][r];
        var bar = new Array(Math.round(p * 15) + 1).join('█');
        lines.push(('  ' + (r + 1)).slice(-3) + '. ' + (tok + '            ').slice(0, 14) + ' ' + p.toFixed(3) + ' ' + bar);
      });
      if (hasTarget) {
        lines.push(L.t('target "{target}": rank {rank}', {target: data.target, rank: data.target_rank[l][t] + 1}) +
          (data.target_prob ? ', p = ' + data.target_prob[l][t].toFixed(4) : ''));
      }
      readout.textContent = lines.join('\n');
    }
  });
  for (var l = 0; l < NL; l++) {
    for (var t = 0; t < T; t++) {
      var p = data.top_probs[l][t][0], td = grid.cells[l][t];
      td.style.background = L.blue(p);
      td.style.color = L.ink(p);
      if (hasTarget && data.target_rank[l][t] === 0) td.className += ' llmlab-target';
    }
  }
  root.appendChild(grid.box);
  // open scrolled to the last layers, where the answer forms
  grid.box.scrollTop = grid.box.scrollHeight;
};

// The live model's run for this view: the lens at the last 8 positions (the book's grid), with the
// book's target token when it is one token of SmolLM2.
window.llmlab.liveOptions.lens = function (data, live) {
  var options = {lensLast: 8};
  if (data.live && data.live.steer) options.steer = data.live.steer;     // the view shows a steered model
  if (!data.target) return options;
  var text = String(data.target).replace(/\u2423/g, ' ');
  return live.tokenize(text).then(function (t) {
    if (t.ids.length === 1) options.lensTarget = t.ids[0];
    return options;
  });
};

// The live model's result as this view's data: the logit lens at the last positions, every layer.
window.llmlab.liveData.lens = function (r, data) {
  var g = r.lensGrid, layers = ['embed'];
  for (var l = 0; l + 1 < g.tokens.length; l++) layers.push('block ' + l);
  var hasTarget = g.target !== null && g.target !== undefined;
  var names = window.llmlab.readableTokens(r.tokens);          // whole runs of the prompt, not only the last 8
  return {positions: g.positions.map(function (p) { return names[p]; }), layers: layers,
          top_tokens: g.tokens, top_probs: g.probs,
          target: hasTarget ? window.llmlabLive.token(g.target) : null,
          target_rank: hasTarget ? g.targetRanks : null, target_prob: hasTarget ? g.targetProbs : null, live: data.live,
          title: window.llmlab.t('SmolLM2-135M, live in your browser: what each layer predicts at the last {n} positions', {n: g.positions.length}) +
                 (data.live && data.live.steer ? window.llmlab.t(', with the steering vector added after block {block} (scale {scale})',
                                                                  {block: data.live.steer.layer, scale: data.live.steer.scale}) : '')};
};
