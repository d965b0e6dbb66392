// Similarity heatmap: a matrix with row and column labels; hover, tap or arrow to a cell for its value.
// data: {matrix: [N][M], rows: [str], cols: [str], vmin, vmax, show_values, legend, center: number|null}
window.llmlab.views.similarity = function (root, data) {
  var L = window.llmlab;
  // center (optional): a diverging scale around it (1 for ratios); values are shown uncapped
  var c = data.center === null || data.center === undefined ? 0 : data.center;
  var diverging = data.center !== null && data.center !== undefined || data.vmin < 0;
  var vmax = Math.max(Math.abs(data.vmin - c), Math.abs(data.vmax - c)) || 1e-12;
  function colour(v) {
    return diverging ? L.diverging(v - c, vmax) : L.blue((v - data.vmin) / ((data.vmax - data.vmin) || 1));
  }
  function alpha(v) {
    return diverging ? Math.min(1, Math.abs(v - c) / vmax) : (v - data.vmin) / ((data.vmax - data.vmin) || 1);
  }
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  root.appendChild(L.legend({label: data.legend || L.t('value'), scale: diverging ? 'diverging' : 'blue',
    min: diverging ? c - vmax : data.vmin, max: diverging ? c + vmax : data.vmax}));
  var readout = L.readout(1, L.t('Hover a cell to read its value.'));
  root.appendChild(readout);
  var grid = L.grid({
    rows: data.rows, cols: data.cols, corner: '', label: data.title || L.t('heatmap'),
    className: data.cols.length > 28 && !data.show_values ? 'llmlab-compact' : '',
    text: function (i, j) { return data.show_values ? data.matrix[i][j].toFixed(2) : ''; },
    aria: function (i, j) { return L.t('{row} vs {col}: {v}', {row: data.rows[i], col: data.cols[j], v: data.matrix[i][j].toFixed(4)}); },
    show: function (i, j, pinned) {
      readout.textContent = L.t('"{row}" vs "{col}": {v}', {row: data.rows[i], col: data.cols[j], v: data.matrix[i][j].toFixed(4)}) +
        (pinned ? L.t(' [pinned]') : '');
    }
  });
  data.matrix.forEach(function (row, i) {
    row.forEach(function (v, j) {
      grid.cells[i][j].style.background = colour(v);
      grid.cells[i][j].style.color = L.ink(alpha(v));
    });
  });
  root.appendChild(grid.box);
};
