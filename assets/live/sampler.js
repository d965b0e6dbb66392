/* The live model's sampler (llmlab.sampling in JavaScript), in the Web Worker: the page puts
 * String(llmlabSamplerModule) into the worker's source, and the worker calls it once.
 *
 *   var s = llmlabSamplerModule(release);   // release(array): gives a spent array's memory back
 *   s.choose(logits, options, s.generator(seed), seen)   // {id, p, pModel, kept}
 *   s.softmax(logits), s.top(array, k)
 */
function llmlabSamplerModule(release) {
  function top(array, k) {
    var order = [];
    for (var i = 0; i < array.length; i++) {
      if (order.length < k || array[i] > array[order[order.length - 1]]) {
        var at = order.length;
        while (at > 0 && array[order[at - 1]] < array[i]) at--;
        order.splice(at, 0, i);
        if (order.length > k) order.pop();
      }
    }
    return order;
  }
  function softmax(logits) {
    var max = -Infinity, i, out = new Float32Array(logits.length), sum = 0;
    for (i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
    for (i = 0; i < logits.length; i++) { out[i] = Math.exp(logits[i] - max); sum += out[i]; }
    for (i = 0; i < logits.length; i++) out[i] /= sum;
    return out;
  }

  // A seeded generator (mulberry32): the same seed gives the same draws, hence the same text.
  function generator(seed) {
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  // llmlab.sampling: repetition penalty, then temperature, top-k, top-p, min-p (in that order), then a draw.
  function choose(raw, o, random, seen) {
    var V = raw.length, z = raw, i;
    if (o.repetitionPenalty !== null) {
      z = new Float32Array(raw);
      var pen = Math.fround(o.repetitionPenalty);
      for (i = 0; i < V; i++) if (seen[i]) z[i] = z[i] > 0 ? z[i] / pen : z[i] * pen;
    }
    var best = 0;
    for (i = 1; i < V; i++) if (z[i] > z[best]) best = i;
    var modelProbs = softmax(raw);
    if (o.temperature === 0) {
      var greedy = { id: best, p: 1, pModel: modelProbs[best], kept: 1 };
      [modelProbs, z === raw ? null : z].forEach(release);
      return greedy;
    }
    var t = Math.fround(o.temperature), s = new Float32Array(V);
    for (i = 0; i < V; i++) s[i] = z[i] / t;
    var max = s[best], floor = -Infinity;
    if (o.topK !== null && o.topK < V) {
      var sorted = new Float32Array(s).sort();              // ascending
      floor = Math.max(floor, sorted[V - o.topK]);         // the k-th largest (ties with it are kept)
    }
    if (o.topP !== null && o.topP < 1) {
      var order = [];
      for (i = 0; i < V; i++) if (s[i] >= floor && s[i] > -Infinity) order.push(i);
      order.sort(function (a, b) { return s[b] - s[a] || a - b; });
      var sum = 0;
      order.forEach(function (j) { sum += Math.exp(s[j] - max); });
      var before = 0, cut = -Infinity;
      for (var r = 0; r < order.length; r++) {
        if (before >= o.topP) break;                        // p reached without this token: it and the rest go
        cut = s[order[r]];
        before += Math.exp(s[order[r]] - max) / sum;
      }
      floor = Math.max(floor, cut);
    }
    if (o.minP !== null) floor = Math.max(floor, Math.fround(max + Math.fround(Math.log(Math.fround(o.minP)))));
    var total = 0, kept = 0;
    for (i = 0; i < V; i++) if (s[i] >= floor) { total += Math.exp(s[i] - max); kept++; }
    var u = random() * total, acc = 0, pick = best;
    for (i = 0; i < V; i++) {
      if (s[i] < floor) continue;
      acc += Math.exp(s[i] - max);
      pick = i;
      if (acc > u) break;
    }
    var chosen = { id: pick, p: Math.exp(s[pick] - max) / total, pModel: modelProbs[pick], kept: kept };
    [s, modelProbs, sorted, z === raw ? null : z].forEach(release);       // V floats each, every token
    return chosen;
  }
  return { top: top, softmax: softmax, generator: generator, choose: choose };
}
