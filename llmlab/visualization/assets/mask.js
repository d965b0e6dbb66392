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
  controls.appendChild(L.labelled('mask', L.select(data.names, 0, function (v) { current = v; paint(); })));
  controls.appendChild(summary);
  root.appendChild(controls);
  root.appendChild(L.legend({scale: 'binary', items: [
    {colour: ON, text: 'may attend (score kept)'},
    {colour: OFF, text: 'masked (score set to −∞ before the softmax)'}]}));
  var readout = L.readout(2, 'Hover, tap or arrow to a cell: row = query, column = key.');
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
    if (!keys.length) return data.tokens[i] + ' may attend to nothing (0 positions): its softmax has no score to normalise';
    return data.tokens[i] + ' may attend to ' + ranges(keys) + ' (' + keys.length + ' position' + (keys.length === 1 ? '' : 's') + ')';
  }

  var grid = L.grid({
    rows: data.tokens, cols: data.tokens, corner: 'query \\ key', className: T > 32 ? 'llmlab-compact' : '',
    label: 'attention mask',
    aria: function (i, j) {
      return 'query ' + data.tokens[i] + ', key ' + data.tokens[j] + ': ' + (allowed(current, i, j) ? 'may attend' : 'masked');
    },
    show: function (i, j, pinned) {
      readout.textContent = data.names[current] + ' · ' + data.tokens[i] + ' → ' + data.tokens[j] + ': ' +
        (allowed(current, i, j) ? 'may attend' : 'masked') + (pinned ? ' [pinned]' : '') + '\n' + rowFacts(i);
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
    summary.textContent = total + ' of ' + (T * T) + ' scores kept (' + Math.round(100 * total / (T * T)) + '%)';
    grid.relabel();
    if (grid.i >= 0) grid.activate(grid.i, grid.j, 'key');
  }
  paint();
};
