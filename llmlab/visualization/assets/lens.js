// Logit-lens table: rows are layers, columns are positions; each cell shows the top token of
// that layer's residual stream read through the final norm and the unembedding, shaded by its
// probability. Hover (or click to pin) a cell for the top-k list.
// data: {positions: [str], layers: [str], top_tokens: [L][T][k], top_probs: [L][T][k],
//        target: str|null, target_rank: [L][T]|null, target_prob: [L][T]|null}
window.llmlab.views.lens = function (root, data) {
  var L = window.llmlab, T = data.positions.length, pinned = null;
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var readout = L.el('div', {'class': 'llmlab-readout'},
    'Hover a cell to see the top tokens at that layer and position; click to pin.');
  var table = L.el('table', {'class': 'llmlab-grid llmlab-lens'});
  var header = L.el('tr');
  header.appendChild(L.el('th', {}, 'layer \\ token'));
  data.positions.forEach(function (tok) { header.appendChild(L.el('th', {'class': 'llmlab-col'}, tok)); });
  table.appendChild(header);
  data.layers.forEach(function (label, l) {
    var tr = L.el('tr');
    tr.appendChild(L.el('th', {'class': 'llmlab-row'}, label));
    for (var t = 0; t < T; t++) {
      var p = data.top_probs[l][t][0];
      var td = L.el('td', {'class': 'llmlab-cell', 'data-l': l, 'data-t': t}, data.top_tokens[l][t][0]);
      td.style.background = L.blue(p);
      td.style.color = L.ink(p);
      if (data.target !== null && data.target !== undefined && data.target_rank && data.target_rank[l][t] === 0) {
        td.className += ' llmlab-target';
      }
      tr.appendChild(td);
    }
    table.appendChild(tr);
  });
  root.appendChild(readout);
  root.appendChild(table);

  var current = null;
  function show(td) {
    if (current) current.classList.remove('llmlab-hl');
    current = td;
    td.classList.add('llmlab-hl');
    var l = parseInt(td.getAttribute('data-l'), 10), t = parseInt(td.getAttribute('data-t'), 10);
    var lines = [data.layers[l] + ' · position ' + t + ' "' + data.positions[t] + '"' + (pinned ? ' [pinned]' : '')];
    data.top_tokens[l][t].forEach(function (tok, r) {
      var p = data.top_probs[l][t][r];
      var bar = new Array(Math.round(p * 30) + 1).join('█');
      lines.push(('  ' + (r + 1)).slice(-3) + '. ' + (tok + '            ').slice(0, 14) + ' ' + p.toFixed(3) + ' ' + bar);
    });
    if (data.target !== null && data.target !== undefined && data.target_rank) {
      lines.push('target "' + data.target + '": rank ' + (data.target_rank[l][t] + 1) +
        (data.target_prob ? ', p = ' + data.target_prob[l][t].toFixed(4) : ''));
    }
    readout.textContent = lines.join('\n');
  }
  table.addEventListener('mouseover', function (e) {
    var td = e.target.closest('td.llmlab-cell');
    if (td && !pinned) show(td);
  });
  table.addEventListener('click', function (e) {
    var td = e.target.closest('td.llmlab-cell');
    if (!td) return;
    pinned = pinned === td ? null : td;
    show(td);
  });
};
