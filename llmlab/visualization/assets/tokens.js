// Coloured tokenizer view: each row is one tokenization of a text; tokens alternate colours,
// hover a token for its id and bytes, click "show ids" to print every id under its token.
// data: {rows: [{name: str, tokens: [{text: str, id: int, bytes: str|null}]}]}
window.llmlab.views.tokens = function (root, data) {
  var L = window.llmlab;
  var palette = ['#fde2a7', '#b9e3c6', '#f7c6d0', '#c6dbf7', '#e3d1f7', '#f7dcc6'];
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  var button = L.el('button', {type: 'button'}, 'show ids');
  controls.appendChild(button);
  root.appendChild(controls);
  var readout = L.el('div', {'class': 'llmlab-readout'}, 'Hover a token to see its id.');
  var idNodes = [];
  data.rows.forEach(function (row, r) {
    var block = L.el('div', {'class': 'llmlab-token-row'});
    block.appendChild(L.el('div', {'class': 'llmlab-title'}, row.name + ' — ' + row.tokens.length + ' tokens'));
    row.tokens.forEach(function (tok, k) {
      var span = L.el('span', {'class': 'llmlab-tok', 'data-r': r, 'data-k': k, title: 'id ' + tok.id}, tok.text);
      span.style.background = palette[k % palette.length];
      var id = L.el('span', {'class': 'llmlab-id'}, String(tok.id));
      id.style.display = 'none';
      idNodes.push(id);
      span.appendChild(id);
      block.appendChild(span);
    });
    root.appendChild(block);
  });
  root.appendChild(readout);
  var showing = false;
  button.addEventListener('click', function () {
    showing = !showing;
    idNodes.forEach(function (n) { n.style.display = showing ? 'block' : 'none'; });
    button.textContent = showing ? 'hide ids' : 'show ids';
  });
  var active = null;
  root.addEventListener('mouseover', function (e) {
    var span = e.target.closest('.llmlab-tok');
    if (!span) return;
    if (active) active.classList.remove('llmlab-active');
    active = span;
    span.classList.add('llmlab-active');
    var row = data.rows[parseInt(span.getAttribute('data-r'), 10)];
    var k = parseInt(span.getAttribute('data-k'), 10), tok = row.tokens[k];
    readout.textContent = row.name + ' · token ' + k + ' · id ' + tok.id + ' · "' + tok.text + '"' +
      (tok.bytes ? ' · bytes ' + tok.bytes : '');
  });
};
