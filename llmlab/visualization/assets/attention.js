// Attention explorer: every head at a glance (thumbnails; a click focuses one), a layer and head
// picker, the T x T map of the focused head, and the prompt's tokens shaded by where the chosen
// query looks. A checkbox hides the first-token "sink" and renormalises each row, so the structure
// the sink drowns out becomes visible.
// data: {tokens: [str], layers: [str], n_heads: H, weights: base64 bytes of (L, H, T, T), layer, head,
//        query, hide_sink, live: {prompt} (a "Run live" box in the built book, see common.js)}
window.llmlab.views.attention = function (root, data) {
  var L = window.llmlab, T = data.tokens.length, H = data.n_heads, NL = data.layers.length;
  data = Object.assign({}, data, {tokens: L.readableTokens(data.tokens)});   // byte pieces named by their character
  var w = data.weightsArray || L.unpack(data.weights);   // weightsArray: the live model's Float32Array
  var layer = data.layer || 0, head = data.head || 0, hideSink = !!data.hide_sink, scope = 0;

  // head === H means the mean over all heads; with hideSink, key 0 is dropped and the row renormalised
  function raw(l, h, i, j) {
    if (h === H) {
      var s = 0;
      for (var k = 0; k < H; k++) s += w[((l * H + k) * T + i) * T + j];
      return s / H;
    }
    return w[((l * H + h) * T + i) * T + j];
  }
  // the weight a row keeps without the first token, per (layer, head): computed once, when first needed
  var rests = {};
  function rest(l, h, i) {
    var key = l * (H + 1) + h;
    if (!rests[key]) {
      var r = new Float32Array(T);
      for (var a = 0; a < T; a++) { for (var b = 1; b < T; b++) r[a] += raw(l, h, a, b); }
      rests[key] = r;
    }
    return rests[key][i];
  }
  // Without the sink, from the stored renormalised rows (data.weights_nosink) when the view has them:
  // a row where the first token takes 99.9% keeps too little of the rest in 1/255 steps.
  var ns = data.weightsArray ? null : (data.weights_nosink ? L.unpack(data.weights_nosink) : null);
  function weight(l, h, i, j) {
    if (!hideSink || i === 0) return raw(l, h, i, j);
    if (j === 0) return 0;
    if (ns) {
      if (h < H) return ns[((l * H + h) * T + i) * T + j];
      var num = 0, den = 0;                      // mean of heads: each head's row weighted by what it keeps
      for (var k = 0; k < H; k++) {
        var kept = Math.max(1 - w[((l * H + k) * T + i) * T], 1 / 510);
        num += ns[((l * H + k) * T + i) * T + j] * kept;
        den += kept;
      }
      return num / den;
    }
    var r = rest(l, h, i);
    return r > 1e-6 ? raw(l, h, i, j) / r : 0;
  }
  function best(i) {
    var b = 0;
    for (var j = 1; j < T; j++) if (weight(layer, head, i, j) > weight(layer, head, i, b)) b = j;
    return b;
  }

  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var headLabels = [];
  for (var h = 0; h < H; h++) headLabels.push(L.t('head {h}', {h: h}));
  headLabels.push(L.t('mean of heads'));
  var layerNames = data.layers.map(L.layerName);
  var controls = L.el('div', {'class': 'llmlab-controls'});
  var layerPick = L.select(layerNames, layer, function (v) { layer = v; paint(); });
  var headPick = L.select(headLabels, head, function (v) { head = v; paint(); });
  controls.appendChild(L.labelled(L.t('block'), layerPick));
  controls.appendChild(L.labelled(L.t('head'), headPick));
  var sinkBox = L.el('input', {type: 'checkbox', 'data-name': 'hide-sink'});
  sinkBox.checked = hideSink;
  sinkBox.addEventListener('change', function () { hideSink = sinkBox.checked; paint(); });
  var sinkLabel = L.el('label', {'class': 'llmlab-control'});
  sinkLabel.appendChild(sinkBox);
  sinkLabel.appendChild(document.createTextNode(L.t(' hide the first token (sink), renormalise rows')));
  controls.appendChild(sinkLabel);
  if (NL > 1) {
    controls.appendChild(L.labelled(L.t('thumbnails'), L.select([L.t('heads of this block'), L.t('every block')], 0,
      function (v) { scope = v; drawThumbs(); })));
  }
  root.appendChild(controls);

  // heads at a glance
  var thumbs = L.el('div', {'class': 'llmlab-thumbs', role: 'group', 'aria-label': L.t('heads at a glance; pick one to focus it')});
  root.appendChild(thumbs);
  var thumbNodes = [];
  function thumbnail(l, h, label) {
    var button = L.el('button', {type: 'button', 'class': 'llmlab-thumb', 'data-l': l, 'data-h': h,
      'aria-label': L.t('focus {layer}, {head}', {layer: layerNames[l], head: headLabels[h]})});
    var canvas = L.el('canvas', {width: T, height: T});
    var size = Math.max(40, Math.min(72, 2 * T));
    canvas.style.width = size + 'px';
    canvas.style.height = size + 'px';
    var ctx = canvas.getContext('2d'), img = ctx.createImageData(T, T);
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) {
        var v = L.clamp(weight(l, h, i, j)), p = 4 * (i * T + j);
        img.data[p] = Math.round(255 - v * (255 - 31));
        img.data[p + 1] = Math.round(255 - v * (255 - 119));
        img.data[p + 2] = Math.round(255 - v * (255 - 180));
        img.data[p + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    button.appendChild(canvas);
    button.appendChild(L.el('span', {}, label));
    button.addEventListener('click', function () {
      layer = l; head = h;
      layerPick.value = String(l);
      headPick.value = String(h);
      paint();
    });
    thumbs.appendChild(button);
    thumbNodes.push(button);
  }
  function drawThumbs() {
    L.clear(thumbs);
    thumbNodes = [];
    var layers = scope === 1 ? data.layers.map(function (_, l) { return l; }) : [layer];
    // every layer: one row of thumbnails per layer, heads in columns (as a model view does)
    thumbs.style.display = scope === 1 ? 'grid' : '';
    thumbs.style.gridTemplateColumns = scope === 1 ? 'repeat(' + (H === 1 ? 1 : H + 1) + ', max-content)' : '';
    layers.forEach(function (l) {
      for (var h = 0; h <= H; h++) {
        if (h === H && H === 1) continue;
        var name = h === H ? L.t('mean') : 'h' + h;
        thumbnail(l, h, scope === 1 ? (NL > 1 ? shortLayer(l) + ' ' : '') + name : name);
      }
    });
    markThumbs();
  }
  // "block 29" -> "B29": the number the layer menu shows, not the thumbnail's index
  function shortLayer(l) {
    var m = /(\d+)\s*$/.exec(data.layers[l]);
    return m ? 'B' + m[1] : data.layers[l];
  }
  function markThumbs() {
    thumbNodes.forEach(function (b) {
      var on = parseInt(b.getAttribute('data-l'), 10) === layer && parseInt(b.getAttribute('data-h'), 10) === head;
      b.classList.toggle('llmlab-active', on);
      b.setAttribute('aria-pressed', on ? 'true' : 'false');
    });
  }

  root.appendChild(L.legend({label: L.t('attention weight'), min: 0, max: 1}));
  var line = L.el('div', {'class': 'llmlab-tokens', 'aria-label': L.t('the prompt; pick a token to see where it looks')});
  var spans = data.tokens.map(function (tok, j) {
    var span = L.el('span', {'class': 'llmlab-tok', 'data-j': j}, tok);
    line.appendChild(span);
    return span;
  });
  root.appendChild(line);
  var key = L.tokenKey(data.tokens);
  if (key) root.appendChild(key);
  var readout = L.readout(2);
  root.appendChild(readout);

  var grid = L.grid({
    rows: data.tokens, cols: data.tokens, corner: L.t('query \\ key'), className: T > 24 ? 'llmlab-compact' : '',
    label: L.t('attention map, rows are queries, columns are keys'),
    aria: function (i, j) {
      return L.t('query {i} {qt}, key {j} {kt}: {w}', {i: i, qt: data.tokens[i], j: j, kt: data.tokens[j], w: weight(layer, head, i, j).toFixed(3)});
    },
    show: function () { paintQuery(); }
  });
  root.appendChild(grid.box);
  L.tokenLine(line, spans, function (k) { return L.t('token {k}: {text}', {k: k, text: data.tokens[k]}); }, function (k, how) {
    grid.activate(k, best(k), how);
  });

  function paintQuery() {
    var q = grid.i, key = grid.j;
    spans.forEach(function (span, j) {
      var v = weight(layer, head, q, j);
      span.style.background = L.blue(v);
      span.style.color = L.ink(v);
      span.className = 'llmlab-tok' + (j === q ? (grid.pinned ? ' llmlab-pinned' : ' llmlab-active') : '');
    });
    var b = best(q);
    var where = layerNames[layer] + ' · ' + headLabels[head] + (hideSink ? L.t(' · first token hidden') : '') + ' · ';
    // Positions name the tokens: a prompt may hold the same token twice ("the" at 1 and at 5).
    readout.textContent = where + L.t('"{query}" (position {q}) → "{key}" (position {k}): {w}', {query: data.tokens[q],
      q: q, key: data.tokens[key], k: key, w: weight(layer, head, q, key).toFixed(3)}) + (grid.pinned ? L.t(' [pinned]') : '') + '\n' +
      L.t('"{query}" (position {q}) looks most at "{best}" (position {b}): {w}', {query: data.tokens[q], q: q,
                                                                                  best: data.tokens[b], b: b,
                                                                                  w: weight(layer, head, q, b).toFixed(3)}) +
      (q > 0 ? L.t('; the first token takes {w}', {w: raw(layer, head, q, 0).toFixed(3)}) : '');
  }
  function paint() {
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) grid.cells[i][j].style.background = L.blue(weight(layer, head, i, j));
    }
    grid.relabel();
    if (scope === 0 || hideSink !== drawn) drawThumbs(); else markThumbs();
    drawn = hideSink;
    paintQuery();
  }
  var drawn = hideSink;
  var q0 = data.query === undefined || data.query === null ? T - 1 : data.query;
  grid.activate(q0, best(q0), 'key');
  drawThumbs();
  paint();
};

// The live model's result (llmlabLive.run) as this view's data: every block, the same layer number,
// head and sink setting as the book's view.
window.llmlab.liveData.attention = function (r, data) {
  var layers = [];
  for (var l = 0; l < r.nLayers; l++) layers.push('block ' + l);
  var m = /(\d+)\s*$/.exec(data.layers[data.layer] || '');
  var layer = m ? Math.min(parseInt(m[1], 10), r.nLayers - 1) : 0;
  return {tokens: r.tokens, layers: layers, n_heads: r.nHeads, weightsArray: r.attentionArray, layer: layer,
          head: Math.min(data.head || 0, r.nHeads), query: null, hide_sink: data.hide_sink, live: data.live,
          title: window.llmlab.t('SmolLM2-135M, live in your browser: attention on your prompt')};
};

// What the reader has set in the view now (layer, head, the sink box), as fields of the view's data:
// liveData.attention then finds the same layer number among the live model's layers.
window.llmlab.liveSettings.attention = function (node) {
  var selects = node.querySelectorAll('.llmlab-controls select'), box = node.querySelector('input[data-name="hide-sink"]');
  var out = {};
  if (selects.length >= 2) {
    out.layers = Array.prototype.map.call(selects[0].options, function (o) { return o.text; });
    out.layer = parseInt(selects[0].value, 10);
    out.head = parseInt(selects[1].value, 10);
  }
  if (box) out.hide_sink = box.checked;
  return out;
};
