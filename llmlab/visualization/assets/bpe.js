// BPE merge step-through: step 0 is the text split into single symbols; each step merges the
// most frequent adjacent pair everywhere. Buttons or the slider move through the steps.
// data: {steps: [{tokens: [str], pair: [str, str]|null, merged: str|null, count: int|null}]}
window.llmlab.views.bpe = function (root, data) {
  var L = window.llmlab, step = 0, last = data.steps.length - 1;
  L.clear(root);
  if (data.title) root.appendChild(L.el('div', {'class': 'llmlab-title'}, data.title));
  var controls = L.el('div', {'class': 'llmlab-controls'});
  var prev = L.el('button', {type: 'button', 'data-action': 'prev'}, L.t('◀ previous merge'));
  var next = L.el('button', {type: 'button', 'data-action': 'next'}, L.t('next merge ▶'));
  var range = L.el('input', {type: 'range', min: 0, max: last, step: 1, value: 0});
  controls.appendChild(prev);
  controls.appendChild(next);
  controls.appendChild(L.labelled(L.t('step'), range));
  root.appendChild(controls);
  var symbols = [];
  data.steps.forEach(function (st) { symbols = symbols.concat(st.tokens); });
  var key = L.tokenKey(symbols);                   // e.g. why a merge reads "<88>" + "好"
  if (key) root.appendChild(key);
  var readout = L.readout(2);
  var line = L.el('div', {'class': 'llmlab-tokens'});
  var merges = L.readout(8);
  merges.style.height = merges.style.minHeight;    // the list of merges scrolls in a box of its own
  merges.style.overflowY = 'auto';
  merges.setAttribute('aria-live', 'off');
  root.appendChild(readout);
  root.appendChild(line);
  root.appendChild(merges);

  function paint() {
    var s = data.steps[step];
    range.value = step;
    readout.textContent = step === 0
      ? L.t('step 0: {n} symbols, no merges yet', {n: s.tokens.length})
      : L.t('step {step}: merge "{a}" + "{b}" → "{merged}" ({count} times) · {n} tokens',
            {step: step, a: s.pair[0], b: s.pair[1], merged: s.merged, count: s.count, n: s.tokens.length});
    L.clear(line);
    s.tokens.forEach(function (tok) {
      var span = L.el('span', {'class': 'llmlab-tok'}, tok);
      span.style.background = step > 0 && tok === s.merged ? '#ffbb78' : '#eee';
      line.appendChild(span);
    });
    var learned = [];
    for (var i = 1; i <= step; i++) learned.push(i + '. ' + data.steps[i].pair[0] + ' + ' + data.steps[i].pair[1] + ' → ' + data.steps[i].merged);
    merges.textContent = learned.length ? L.t('merges learned so far:') + '\n' + learned.join('\n') : '';
    merges.scrollTop = merges.scrollHeight;
  }
  prev.addEventListener('click', function () { if (step > 0) { step--; paint(); } });
  next.addEventListener('click', function () { if (step < last) { step++; paint(); } });
  range.addEventListener('input', function () { step = parseInt(range.value, 10); paint(); });
  paint();
};
