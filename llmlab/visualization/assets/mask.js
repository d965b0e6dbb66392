// Attention-mask view: which keys (columns) each query (row) may attend to, for a few masks.
// A mask is not a pattern of weights: a cell is either allowed (the score is kept) or masked
// (the score is set to -inf before the softmax). Hover, tap or arrow to a cell for the row's facts.
// data: {names: [str], masks: [base64 bytes 0/1 of (T, T)], tokens: [str]}
window.llmlab.views.mask = function (root, data) {
  var L = window.llmlab, T = data.tokens.length, current = 0;
  var masks = data.masks.map(function (b64) { return L.unpack(b64); });
  function allowed(m, i, j) { return masks[m][i * T + j] > 0.5; }
  var ON = '#1f4e79', OFF = '#e9e9e9';

  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  var summary = L.el('span', {'class': 'llmlab-note'});
  controls.appendChild(L.labelled(L.t('mask'), L.select(data.names, 0, function (v) { current = v; paint(); })));
  controls.appendChild(summary);
  root.appendChild(controls);
  root.appendChild(L.legend({scale: 'binary', items: [
    {colour: ON, text: L.t('may attend (score kept)')},
    {colour: OFF, text: L.t('masked (score set to −∞ before the softmax)')}]}));
  var readout = L.readout(2, L.t('Hover, tap or arrow to a cell: row = query, column = key.'));
  root.appendChild(readout);

  // "t2..t5, t9" from a sorted list of positions
  function ranges(list) {
    var parts = [], k = 0;
    while (k < list.length) {
      var start = list[k];
      while (k + 1 < list.length && list[k + 1] === list[k] + 1) k++;
      var end = list[k];
      parts.push(start === end ? data.tokens[start] : data.tokens[start] + '..' + data.tokens[end]);
      k++;
    }
    return parts.join(', ');
  }
  function rowFacts(i) {
    var keys = [];
    for (var j = 0; j < T; j++) if (allowed(current, i, j)) keys.push(j);
    if (!keys.length) return L.t('{token} may attend to nothing (0 positions): its softmax has no score to normalise', {token: data.tokens[i]});
    var facts = {token: data.tokens[i], keys: ranges(keys), n: keys.length};
    return keys.length === 1 ? L.t('{token} may attend to {keys} ({n} position)', facts)
                             : L.t('{token} may attend to {keys} ({n} positions)', facts);
  }

  var grid = L.grid({
    rows: data.tokens, cols: data.tokens, corner: L.t('query \\ key'), className: T > 32 ? 'llmlab-compact' : '',
    label: L.t('attention mask'),
    aria: function (i, j) {
      return L.t('query {q}, key {k}: {state}', {q: data.tokens[i], k: data.tokens[j],
                                               state: allowed(current, i, j) ? L.t('may attend') : L.t('masked')});
    },
    show: function (i, j, pinned) {
      readout.textContent = data.names[current] + ' · ' + L.t('{query} (position {q}) → {key} (position {k}): {state}', {
        query: data.tokens[i], q: i, key: data.tokens[j], k: j, state: allowed(current, i, j) ? L.t('may attend') : L.t('masked')}) +
        (pinned ? L.t(' [pinned]') : '') + '\n' + rowFacts(i);
    }
  });
  root.appendChild(grid.box);

  function paint() {
    var total = 0;
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) {
        var on = allowed(current, i, j);
        total += on ? 1 : 0;
        grid.cells[i][j].style.background = on ? ON : OFF;
      }
    }
    summary.textContent = L.t('{kept} of {all} scores kept ({share}%)', {kept: total, all: T * T, share: Math.round(100 * total / (T * T))});
    grid.relabel();
    if (grid.i >= 0) grid.activate(grid.i, grid.j, 'key');
  }
  paint();
};
