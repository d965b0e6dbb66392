/* The book's live model: SmolLM2-135M running in this page with onnxruntime-web (one entry point).
 *
 *   await llmlabLive.ready();                    // loads the model (once), resolves when it can run
 *   const r = await llmlabLive.run("The Eiffel Tower is in the city of");
 *   r.tokens, r.ids                              // the prompt's tokens as the book shows them, and ids
 *   r.next[0]                                    // {id, token, p}: the most likely next token (20 kept)
 *   r.attention(5, 6)                            // block 5, head 6: T x T weights, each row sums to 1
 *   r.lens[0], r.lens[30]                        // logit lens at the last position: embedding first,
 *                                                //   then after each block; 5 x {id, token, p} each
 *   llmlabLive.token(7042)                       // "␣Paris": any id as the book shows tokens (once ready)
 *
 * Where the files come from: llmlab.live writes them into _static/vendor/live/ as classic script
 * files (they load from file:// as well as from a web server; no fetch, nothing from the network).
 * The model runs in a Web Worker made from a Blob, on one thread (threads need cross-origin
 * isolation, which file:// pages cannot have), so the page never freezes while it computes.
 * Progress: window events "llmlab-live" with detail {status, loaded, total, message}.
 */
(function () {
  "use strict";
  if (window.llmlabLive) return;

  var script = document.currentScript;
  var liveBase = new URL(".", script ? script.src : document.baseURI);     // .../_static/live/
  var vendorBase = new URL("../vendor/live/", liveBase);                   // .../_static/vendor/live/
  window.llmlabLiveFiles = window.llmlabLiveFiles || {};

  var state = { status: "idle", loaded: 0, total: 0, message: "" };
  var readyPromise = null, worker = null, info = null, pending = {}, nextRequest = 1;

  function emit(patch) {
    for (var key in patch) state[key] = patch[key];
    window.dispatchEvent(new CustomEvent("llmlab-live", { detail: Object.assign({}, state) }));
  }

  function loadScript(url) {
    return new Promise(function (resolve, reject) {
      var tag = document.createElement("script");
      tag.src = url;
      tag.onload = function () { tag.remove(); resolve(); };
      tag.onerror = function () {
        tag.remove();
        reject(new Error("Could not load " + url + ". The live model's files are written by `make book` " +
                         "(Makefile target `live`) into _static/vendor/live/; is this a complete build of the book?"));
      };
      document.head.appendChild(tag);
    });
  }

  async function loadFiles() {
    if (!window.llmlabLiveManifest) await loadScript(new URL("manifest.js", vendorBase).href);
    var files = window.llmlabLiveManifest.files;
    var total = files.reduce(function (s, f) { return s + f.script_bytes; }, 0), loaded = 0;
    emit({ status: "loading", loaded: 0, total: total, message: "loading the model files" });
    for (var i = 0; i < files.length; i++) {
      if (!(files[i].key in window.llmlabLiveFiles)) await loadScript(new URL(files[i].script, vendorBase).href);
      loaded += files[i].script_bytes;
      emit({ loaded: loaded, message: "loaded " + files[i].script });
    }
    return window.llmlabLiveManifest;
  }

  function call(type, payload, transfer) {
    return new Promise(function (resolve, reject) {
      var id = nextRequest++;
      pending[id] = { resolve: resolve, reject: reject };
      worker.postMessage(Object.assign({ id: id, type: type }, payload), transfer || []);
    });
  }

  async function start() {
    var t0 = performance.now();
    var manifest = await loadFiles();
    var filesMs = performance.now() - t0;
    var F = window.llmlabLiveFiles;
    emit({ status: "starting", message: "starting onnxruntime (WebAssembly, one thread)" });
    var source = [F["ort.wasm.min.js"], "\n;\n", String(makeTokenizer), "\n;(", String(workerMain), ")();\n"];
    worker = new Worker(URL.createObjectURL(new Blob(source, { type: "text/javascript" })));
    worker.onmessage = function (event) {
      var m = event.data, p = pending[m.id];
      if (!p) return;
      delete pending[m.id];
      if (m.error) p.reject(new Error(m.error)); else p.resolve(m);
    };
    worker.onerror = function (event) {
      emit({ status: "failed", message: String(event.message || event) });
    };
    var data = manifest.files.filter(function (f) { return /^model\.data\./.test(f.key); })
      .map(function (f) { return { key: f.key, file: F[f.key] }; });
    var reply = await call("init", {
      mjs: F["ort-wasm-simd-threaded.mjs"], wasm: F["ort-wasm-simd-threaded.wasm"],
      model: F["model.onnx"], data: data, tokenizer: F.tokenizer, maxTokens: manifest.max_tokens,
      nLayers: manifest.n_layers, nHeads: manifest.n_heads
    });
    manifest.files.forEach(function (f) { delete F[f.key]; });   // the worker has its own copies now
    info = { nLayers: reply.nLayers, nHeads: reply.nHeads, maxTokens: manifest.max_tokens, vocab: reply.vocab,
             model: manifest.model, timings: Object.assign({ files_ms: filesMs }, reply.timings) };
    emit({ status: "ready", message: "ready" });
    return info;
  }

  function ready() {
    if (!readyPromise) {
      readyPromise = start().catch(function (error) {
        readyPromise = null;
        emit({ status: "failed", message: error.message });
        throw error;
      });
    }
    return readyPromise;
  }

  function checkIndex(what, value, n) {
    if (!Number.isInteger(value) || value < 0 || value >= n) {
      throw new RangeError(what + " must be an integer from 0 to " + (n - 1) + " (numbered from 0 like llmlab); got " +
                           JSON.stringify(value) + ".");
    }
  }

  async function run(prompt) {
    if (typeof prompt !== "string") {
      throw new TypeError("llmlabLive.run(prompt) takes a string; got " + (prompt === null ? "null" : typeof prompt) + ".");
    }
    if (!prompt.length) throw new Error("The prompt is empty: type some text, e.g. llmlabLive.run(\"The capital of France is\").");
    await ready();
    var m = await call("run", { prompt: prompt });
    var T = m.ids.length, L = m.nLayers, H = m.nHeads, att = m.attention;
    return {
      prompt: prompt, ids: m.ids, tokens: m.tokens, next: m.next, lens: m.lens,
      logits: m.logits,              // Float32Array (vocab): the next token's logits, for the sampling view
      attentionArray: att,           // Float32Array (layers, heads, T, T): what attention(layer, head) reads
      nLayers: L, nHeads: H,
      attention: function (layer, head) {
        checkIndex("layer", layer, L);
        checkIndex("head", head, H);
        var rows = [], base = (layer * H + head) * T * T;
        for (var i = 0; i < T; i++) rows.push(Array.from(att.subarray(base + i * T, base + (i + 1) * T)));
        return rows;
      }
    };
  }

  window.llmlabLive = {
    ready: ready,
    run: run,
    status: function () { return Object.assign({}, state); },
    info: function () { return info; },
    token: function (id) { return info ? info.vocab[id] : undefined; }
  };

  /* ------------------------------------------------------------------ the tokenizer (runs in the worker)
   * A port of llmlab's ByteLevelBPE: split on special tokens, pre-split with the regex patterns,
   * UTF-8 bytes -> one token per byte -> merges, lowest rank first (leftmost on ties). The display
   * form of a token is llmlab.visualization.show_token's: "␣" for a space, "<e5>" for a byte that is
   * not a whole character, "⟨im_start⟩" for a special token. */
  function makeTokenizer(spec) {
    var printable = [], b;
    for (b = 33; b <= 126; b++) printable.push(b);
    for (b = 161; b <= 172; b++) printable.push(b);
    for (b = 174; b <= 255; b++) printable.push(b);
    var charToByte = new Map(), extra = 0;
    printable.forEach(function (x) { charToByte.set(String.fromCharCode(x), x); });
    for (b = 0; b < 256; b++) if (printable.indexOf(b) < 0) charToByte.set(String.fromCharCode(256 + extra++), b);
    var utf8 = new TextEncoder();
    var specialIds = new Map();
    Object.keys(spec.special_tokens).forEach(function (t) { specialIds.set(spec.special_tokens[t], t); });
    function key(bytes) { var s = ""; for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]); return s; }
    var tokenBytes = spec.tokens.map(function (t, i) {
      if (specialIds.has(i)) return utf8.encode(t);
      var out = [];
      for (var ch of t) {
        if (charToByte.has(ch)) out.push(charToByte.get(ch));
        else utf8.encode(ch).forEach(function (x) { out.push(x); });
      }
      return Uint8Array.from(out);
    });
    var idOfBytes = new Map();
    tokenBytes.forEach(function (bytes, i) { if (!specialIds.has(i) && !idOfBytes.has(key(bytes))) idOfBytes.set(key(bytes), i); });
    var byteIds = [];
    for (b = 0; b < 256; b++) byteIds.push(idOfBytes.get(String.fromCharCode(b)));
    var ranks = new Map();
    spec.merges.forEach(function (pair, rank) {
      var k = pair[0] * 65536 + pair[1];
      if (!ranks.has(k)) ranks.set(k, [rank, idOfBytes.get(key(tokenBytes[pair[0]]) + key(tokenBytes[pair[1]]))]);
    });
    var patterns = spec.patterns.map(function (p) { return new RegExp(p, "gu"); });
    var specials = Object.keys(spec.special_tokens).sort(function (a, c) { return c.length - a.length; });
    var specialRe = specials.length ? new RegExp(specials.map(function (s) {
      return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    }).join("|"), "g") : null;

    function preSplit(text) {
      var chunks = text ? [text] : [];
      patterns.forEach(function (re) {
        var out = [];
        chunks.forEach(function (chunk) {
          var start = 0, m;
          re.lastIndex = 0;
          while ((m = re.exec(chunk)) !== null) {
            if (m[0] === "") { re.lastIndex++; continue; }
            if (m.index > start) out.push(chunk.slice(start, m.index));
            out.push(m[0]);
            start = m.index + m[0].length;
          }
          if (start < chunk.length) out.push(chunk.slice(start));
        });
        chunks = out;
      });
      return chunks;
    }

    function applyMerges(ids) {
      while (ids.length > 1) {
        var best = -1, bestRank = Infinity, bestId = -1;
        for (var i = 0; i + 1 < ids.length; i++) {
          var r = ranks.get(ids[i] * 65536 + ids[i + 1]);
          if (r && r[0] < bestRank) { bestRank = r[0]; best = i; bestId = r[1]; }
        }
        if (best < 0) break;
        ids.splice(best, 2, bestId);
      }
      return ids;
    }

    function encodeOrdinary(text, ids) {
      preSplit(text).forEach(function (chunk) {
        var pieces = [];
        utf8.encode(chunk).forEach(function (x) { if (byteIds[x] !== undefined) pieces.push(byteIds[x]); });
        applyMerges(pieces).forEach(function (id) { ids.push(id); });
      });
    }

    function encode(text) {
      var ids = [], start = 0, m;
      if (specialRe) {
        specialRe.lastIndex = 0;
        while ((m = specialRe.exec(text)) !== null) {
          if (m.index > start) encodeOrdinary(text.slice(start, m.index), ids);
          ids.push(spec.special_tokens[m[0]]);
          start = m.index + m[0].length;
        }
      }
      if (start < text.length) encodeOrdinary(text.slice(start), ids);
      return ids;
    }

    // UTF-8 with every byte that is not part of a whole character written as <xx> (llmlab's _decode).
    function sequenceLength(bytes, i) {
      var b0 = bytes[i], n, lo = 0x80, hi = 0xBF;
      if (b0 < 0x80) return 1;
      if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
      else if (b0 >= 0xE0 && b0 <= 0xEF) { n = 3; if (b0 === 0xE0) lo = 0xA0; if (b0 === 0xED) hi = 0x9F; }
      else if (b0 >= 0xF0 && b0 <= 0xF4) { n = 4; if (b0 === 0xF0) lo = 0x90; if (b0 === 0xF4) hi = 0x8F; }
      else return 0;
      if (i + n > bytes.length) return 0;
      for (var k = 1; k < n; k++) {
        var c = bytes[i + k];
        if (k === 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return 0;
      }
      return n;
    }
    var decoder = new TextDecoder("utf-8");
    function hex(x) { return "<" + (x < 16 ? "0" : "") + x.toString(16) + ">"; }
    function decodeBytes(bytes) {
      var out = "", i = 0;
      while (i < bytes.length) {
        var n = sequenceLength(bytes, i);
        if (n) { out += decoder.decode(bytes.subarray(i, i + n)); i += n; } else { out += hex(bytes[i]); i += 1; }
      }
      return out;
    }
    var WHITESPACE = { " ": "\u2423", "\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d" };
    var KNOWN_SPECIAL = ["<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<s>", "</s>", "<cls>", "<sep>",
                         "<filename>", "<reponame>"];            // as llmlab/visualization/display.py
    var SPECIAL_FORM = /^(?:<\|[A-Za-z0-9_.:-]+\|>|<[A-Za-z0-9]+_[A-Za-z0-9_]+>|<unused[0-9]+>)$/;
    function show(id) {
      var text = decodeBytes(tokenBytes[id]);
      var special = specialIds.has(id) || KNOWN_SPECIAL.indexOf(text) >= 0 || SPECIAL_FORM.test(text);
      if (special) {
        var name = text.trim();
        if (name[0] === "<") name = name.slice(1);
        if (name[name.length - 1] === ">") name = name.slice(0, -1);
        return "\u27e8" + name.replace(/^\|+|\|+$/g, "") + "\u27e9";
      }
      var out = "";
      for (var ch of text) {
        var code = ch.codePointAt(0);
        out += WHITESPACE[ch] || (code < 32 || code === 127 ? hex(code) : ch);
      }
      return out;
    }
    return { encode: encode, show: show, size: spec.tokens.length };
  }

  /* ------------------------------------------------------------------ the worker */
  function workerMain() {
    var session = null, tokenizer = null, maxTokens = 0, vocab = null, shape = null;

    // llmlab.live.site's text form: 15-bit numbers written as characters U+3000 + n.
    function decode15(file) {
      var text = file.text, n = file.bytes, out = new Uint8Array(n), acc = 0, bits = 0, j = 0;
      for (var i = 0; i < text.length && j < n; i++) {
        acc = (acc << 15) | (text.charCodeAt(i) - 0x3000);
        bits += 15;
        while (bits >= 8 && j < n) { bits -= 8; out[j++] = (acc >>> bits) & 255; }
        acc &= (1 << bits) - 1;
      }
      return out;
    }

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

    async function init(m) {
      var ort = self.ort, t0 = performance.now(), timings = {};
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.proxy = false;
      ort.env.wasm.wasmPaths = { mjs: URL.createObjectURL(new Blob([m.mjs], { type: "text/javascript" })) };
      ort.env.wasm.wasmBinary = decode15(m.wasm);
      tokenizer = makeTokenizer(m.tokenizer);
      maxTokens = m.maxTokens;
      var externalData = m.data.map(function (d) { return { path: d.key, data: decode15(d.file) }; });
      var graph = decode15(m.model);
      timings.decode_ms = performance.now() - t0;
      session = await ort.InferenceSession.create(graph, {
        executionProviders: ["wasm"], graphOptimizationLevel: "all", externalData: externalData
      });
      timings.session_ms = performance.now() - t0 - timings.decode_ms;
      vocab = [];
      for (var i = 0; i < tokenizer.size; i++) vocab.push(tokenizer.show(i));
      shape = { nLayers: m.nLayers, nHeads: m.nHeads };
      return { nLayers: shape.nLayers, nHeads: shape.nHeads, vocab: vocab, timings: timings };
    }

    function forward(ids) {
      var input = new self.ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [ids.length]);
      return session.run({ input_ids: input });
    }

    async function run(m) {
      var ids = tokenizer.encode(m.prompt);
      if (!ids.length) throw new Error("The prompt " + JSON.stringify(m.prompt) + " gives no tokens; type some text.");
      if (ids.length > maxTokens) {
        throw new Error("The prompt is " + ids.length + " tokens long; the live model takes at most " + maxTokens +
                        ". Shorten it.");
      }
      var out = await forward(ids);
      var probs = out.probs.data, k = out.lens_ids.dims[1];
      var next = top(probs, 20).map(function (id) { return { id: id, token: vocab[id], p: probs[id] }; });
      var lens = [];
      for (var row = 0; row < out.lens_ids.dims[0]; row++) {
        var cells = [];
        for (var c = 0; c < k; c++) {
          var id = Number(out.lens_ids.data[row * k + c]);
          cells.push({ id: id, token: vocab[id], p: out.lens_probs.data[row * k + c] });
        }
        lens.push(cells);
      }
      var attention = out.attention.data, logits = out.logits.data;
      return {
        reply: { ids: ids, tokens: ids.map(function (id) { return vocab[id]; }), next: next, lens: lens,
                 attention: attention, logits: logits, nLayers: shape.nLayers, nHeads: shape.nHeads },
        transfer: [attention.buffer, logits.buffer]
      };
    }

    self.onmessage = async function (event) {
      var m = event.data;
      try {
        if (m.type === "init") {
          self.postMessage(Object.assign({ id: m.id }, await init(m)));
        } else if (m.type === "run") {
          var r = await run(m);
          self.postMessage(Object.assign({ id: m.id }, r.reply), r.transfer);
        }
      } catch (error) {
        self.postMessage({ id: m.id, error: String(error && error.message || error) });
      }
    };
  }
})();
