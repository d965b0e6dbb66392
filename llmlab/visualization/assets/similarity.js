// Similarity heatmap: a matrix with row and column labels; hover a cell for its value.
// data: {matrix: [N][M], rows: [str], cols: [str], vmin, vmax}
window.llmlab.views.similarity = function (root, data) {
  var L = window.llmlab;
  var diverging = data.vmin < 0, vmax = Math.max(Math.abs(data.vmin), Math.abs(data.vmax));
  function colour(v) {
    return diverging ? L.diverging(v, vmax) : L.blue((v - data.vmin) / ((data.vmax - data.vmin) || 1));
  }
  function alpha(v) {
    return diverging ? Math.abs(v) / (vmax || 1) : (v - data.vmin) / ((data.vmax - data.vmin) || 1);
  }
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var readout = L.el('div', {'class': 'llmlab-readout'}, 'Hover a cell to read its value.');
  var table = L.el('table', {'class': 'llmlab-grid'});
  var header = L.el('tr');
  header.appendChild(L.el('th'));
  var colHeads = data.cols.map(function (c) {
    var th = L.el('th', {'class': 'llmlab-col'}, c);
    header.appendChild(th);
    return th;
  });
  table.appendChild(header);
  var rowHeads = [];
  data.matrix.forEach(function (row, i) {
    var tr = L.el('tr');
    var th = L.el('th', {'class': 'llmlab-row'}, data.rows[i]);
    rowHeads.push(th);
    tr.appendChild(th);
    row.forEach(function (v, j) {
      var td = L.el('td', {'class': 'llmlab-cell', 'data-i': i, 'data-j': j}, data.show_values ? v.toFixed(2) : '');
      td.style.background = colour(v);
      td.style.color = L.ink(alpha(v));
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  root.appendChild(readout);
  root.appendChild(table);
  var last = null;
  table.addEventListener('mouseover', function (e) {
    var td = e.target.closest('td.llmlab-cell');
    if (!td) return;
    var i = parseInt(td.getAttribute('data-i'), 10), j = parseInt(td.getAttribute('data-j'), 10);
    if (last) { last[0].classList.remove('llmlab-hl'); last[1].classList.remove('llmlab-hl'); last[2].classList.remove('llmlab-hl'); }
    last = [td, rowHeads[i], colHeads[j]];
    last.forEach(function (n) { n.classList.add('llmlab-hl'); });
    readout.textContent = '"' + data.rows[i] + '" vs "' + data.cols[j] + '": ' + data.matrix[i][j].toFixed(4);
  });
};
