// Shared helpers for llmlab's views. Plain DOM, no libraries, safe to include many times.
window.llmlab = window.llmlab || {};
window.llmlab.views = window.llmlab.views || {};
(function (L) {
  // el('td', {class: 'x', title: 'y'}, 'text') -> a new element
  L.el = function (tag, attrs, text) {
    var node = document.createElement(tag);
    for (var key in (attrs || {})) node.setAttribute(key, attrs[key]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  };
  L.clamp = function (v) { return Math.max(0, Math.min(1, v)); };
  // the same colour scales as llmlab/visualization/html.py
  L.blue = function (v) { return 'rgba(31,119,180,' + L.clamp(v).toFixed(3) + ')'; };
  L.diverging = function (v, vmax) {
    var a = vmax > 0 ? L.clamp(Math.abs(v) / vmax) : 0;
    return (v >= 0 ? 'rgba(31,119,180,' : 'rgba(214,39,40,') + a.toFixed(3) + ')';
  };
  L.ink = function (alpha) { return alpha > 0.55 ? '#fff' : '#111'; };
  // base64 of one byte per value -> Float32Array of values in [0, 1]
  L.unpack = function (b64) {
    var bin = atob(b64), out = new Float32Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i) / 255;
    return out;
  };
  // <select> with the given labels; onchange(index)
  L.select = function (labels, selected, onchange) {
    var s = L.el('select');
    labels.forEach(function (label, i) {
      var o = L.el('option', {value: i}, label);
      if (i === selected) o.selected = true;
      s.appendChild(o);
    });
    s.addEventListener('change', function () { onchange(parseInt(s.value, 10)); });
    return s;
  };
  L.labelled = function (text, control) {
    var span = L.el('label', {'class': 'llmlab-control'}, text + ' ');
    span.appendChild(control);
    return span;
  };
  L.clear = function (node) { while (node.firstChild) node.removeChild(node.firstChild); };
})(window.llmlab);
