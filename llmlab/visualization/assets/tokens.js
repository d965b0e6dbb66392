// Coloured tokenizer view: each row is one tokenization of a text; tokens alternate colours.
// Hover, tap or arrow to a token for its id and bytes (click or Enter pins it); "show ids" prints
// every id under its token. Tokens follow the book's display rule: ␣ for a space, <e5> for a byte
// that is only part of a character, ⟨bos⟩ for a special token.
// data: {rows: [{name: str, tokens: [{text: str, id: int, bytes: str|null}]}]}
window.llmlab.views.tokens = function (root, data) {
  var L = window.llmlab;
  var palette = ['#fde2a7', '#b9e3c6', '#f7c6d0', '#c6dbf7', '#e3d1f7', '#f7dcc6'];
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  var button = L.el('button', {type: 'button'}, L.t('show ids'));
  controls.appendChild(button);
  root.appendChild(controls);
  var all = [];
  data.rows.forEach(function (row) { row.tokens.forEach(function (t) { all.push(t.text); }); });
  var key = L.tokenKey(all);
  if (key) root.appendChild(key);
  var readout = L.readout(2, L.t('Hover, tap or arrow to a token to see its id.'));
  root.appendChild(readout);
  var idNodes = [], active = null, pinned = null;
  function describe(row, k) {
    var tok = row.tokens[k];
    return L.t('{row} · token {k} · id {id} · "{text}"', {row: row.name, k: k, id: tok.id, text: tok.text}) +
      (tok.bytes ? L.t(' · bytes {bytes}', {bytes: tok.bytes}) : '') +
      (tok.char ? L.t(' · tokens {start}-{end} together make "{text}"', {start: tok.char.start, end: tok.char.end - 1, text: tok.char.text}) : '');
  }
  data.rows.forEach(function (row, r) {
    var block = L.el('div', {'class': 'llmlab-token-row'});
    block.appendChild(L.el('div', {'class': 'llmlab-title'}, L.t('{row} — {n} tokens', {row: row.name, n: row.tokens.length})));
    var line = L.el('div', {'class': 'llmlab-tokens', 'aria-label': L.t('{row} tokens', {row: row.name})});
    var spans = row.tokens.map(function (tok, k) {
      var span = L.el('span', {'class': 'llmlab-tok', 'data-r': r, 'data-k': k, title: L.t('id {id}', {id: tok.id})}, tok.text);
      if (tok.char && k === tok.char.start) {       // the character the pieces make, under its first piece
        span.appendChild(L.el('span', {'class': 'llmlab-char', 'data-char': tok.char.text}, '= ' + tok.char.text));
      }
      span.style.background = palette[k % palette.length];
      var id = L.el('span', {'class': 'llmlab-id', 'aria-hidden': 'true'}, String(tok.id));
      id.style.display = 'none';
      idNodes.push(id);
      span.appendChild(id);
      line.appendChild(span);
      return span;
    });
    L.tokenLine(line, spans, function (k) { return describe(row, k); }, function (k, how) {
      var span = spans[k];
      if (how === 'hover' && pinned) return;
      if (how === 'click') pinned = pinned === span ? null : span;
      else if (how === 'key' && pinned) pinned = span;
      if (active) active.classList.remove('llmlab-active', 'llmlab-pinned');
      active = span;
      span.classList.add(pinned === span ? 'llmlab-pinned' : 'llmlab-active');
      readout.textContent = describe(row, k) + (pinned === span ? L.t(' [pinned]') : '');
    });
    block.appendChild(line);
    root.appendChild(block);
  });
  var showing = false;
  button.addEventListener('click', function () {
    showing = !showing;
    idNodes.forEach(function (n) { n.style.display = showing ? 'block' : 'none'; });
    button.textContent = showing ? L.t('hide ids') : L.t('show ids');
  });
};

// The tokens view needs the tokenizer only (1.3 MB), not the model.
window.llmlab.liveRun.tokens = function (live, prompt) {
  if (!prompt) return Promise.reject(new Error(window.llmlab.t('The text is empty: type some text to see its tokens.')));
  return live.tokenize(prompt);
};

// The tokenizer's result as this view's data: SmolLM2's tokens of the reader's text. Tokens that are
// pieces of one character (Chinese, emoji) say which character they make together.
window.llmlab.liveData.tokens = function (r, data) {
  return {rows: [{name: window.llmlab.t('SmolLM2-135M (live, your text)'), tokens: r.ids.map(function (id, k) {
    var c = r.chars && r.chars[k];
    return {text: r.tokens[k], id: id, bytes: null,
            char: c && c.text ? {text: c.text, start: c.start, end: c.end} : null};
  })}], live: data.live};
};
