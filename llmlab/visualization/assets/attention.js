// Attention explorer: pick a layer and a head; hover a query token (row) to see where it looks.
// data: {tokens: [str], layers: [str], n_heads: H, weights: base64 bytes of (L, H, T, T), layer, head}
window.llmlab.views.attention = function (root, data) {
  var L = window.llmlab, T = data.tokens.length, H = data.n_heads;
  var w = L.unpack(data.weights);
  var layer = data.layer || 0, head = data.head || 0, query = T - 1, key = -1, pinned = false;

  // head === H means the mean over all heads
  function weight(l, h, i, j) {
    if (h === H) {
      var s = 0;
      for (var k = 0; k < H; k++) s += w[((l * H + k) * T + i) * T + j];
      return s / H;
    }
    return w[((l * H + h) * T + i) * T + j];
  }

  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var headLabels = [];
  for (var h = 0; h < H; h++) headLabels.push('head ' + h);
  headLabels.push('mean of heads');
  var controls = L.el('div', {'class': 'llmlab-controls'});
  controls.appendChild(L.labelled('layer', L.select(data.layers, layer, function (v) { layer = v; paint(); })));
  controls.appendChild(L.labelled('head', L.select(headLabels, head, function (v) { head = v; paint(); })));
  root.appendChild(controls);

  var line = L.el('div', {'class': 'llmlab-tokens'});
  var spans = data.tokens.map(function (tok, j) {
    var span = L.el('span', {'class': 'llmlab-tok', 'data-j': j}, tok);
    line.appendChild(span);
    return span;
  });
  var readout = L.el('div', {'class': 'llmlab-readout'});
  var table = L.el('table', {'class': 'llmlab-grid'});
  var header = L.el('tr');
  header.appendChild(L.el('th'));
  data.tokens.forEach(function (tok) { header.appendChild(L.el('th', {'class': 'llmlab-col'}, tok)); });
  table.appendChild(header);
  var cells = [];
  for (var i = 0; i < T; i++) {
    var tr = L.el('tr');
    tr.appendChild(L.el('th', {'class': 'llmlab-row'}, data.tokens[i]));
    cells.push([]);
    for (var j = 0; j < T; j++) {
      var td = L.el('td', {'class': 'llmlab-cell', 'data-i': i, 'data-j': j});
      tr.appendChild(td);
      cells[i].push(td);
    }
    table.appendChild(tr);
  }
  root.appendChild(line);
  root.appendChild(readout);
  root.appendChild(table);

  function paint() {
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) {
        var v = weight(layer, head, i, j);
        cells[i][j].style.background = L.blue(v);
        cells[i][j].className = 'llmlab-cell' + (i === query ? ' llmlab-hl' : '');
      }
    }
    var best = 0;
    spans.forEach(function (span, j) {
      var v = weight(layer, head, query, j);
      if (v > weight(layer, head, query, best)) best = j;
      span.style.background = L.blue(v);
      span.style.color = L.ink(v);
      span.className = 'llmlab-tok' + (j === query ? ' llmlab-active' : '');
    });
    var where = data.layers[layer] + ' · ' + headLabels[head] + ' · ';
    if (key >= 0) {
      readout.textContent = where + '"' + data.tokens[query] + '" → "' + data.tokens[key] + '": ' +
        weight(layer, head, query, key).toFixed(3);
    } else {
      readout.textContent = where + '"' + data.tokens[query] + '" (position ' + query + ') looks most at "' +
        data.tokens[best] + '" (' + weight(layer, head, query, best).toFixed(3) + ')' + (pinned ? ' [pinned]' : '');
    }
  }

  table.addEventListener('mouseover', function (e) {
    var td = e.target.closest('td.llmlab-cell');
    if (!td) return;
    query = parseInt(td.getAttribute('data-i'), 10);
    key = parseInt(td.getAttribute('data-j'), 10);
    paint();
  });
  line.addEventListener('mouseover', function (e) {
    var span = e.target.closest('.llmlab-tok');
    if (!span || pinned) return;
    query = parseInt(span.getAttribute('data-j'), 10);
    key = -1;
    paint();
  });
  line.addEventListener('click', function (e) {
    var span = e.target.closest('.llmlab-tok');
    if (!span) return;
    query = parseInt(span.getAttribute('data-j'), 10);
    key = -1;
    pinned = !pinned;
    paint();
  });
  paint();
};
