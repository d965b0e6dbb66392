/* The book's live model: SmolLM2-135M running in this page (one entry point). generate() runs the decode
 * kernel (kernel.js, decode.wasm: the GGUF blocks read directly); run(), what the views call, runs the
 * exact onnxruntime-web graph, which starts only then (it holds the weights expanded to float32).
 *
 *   await llmlabLive.ready();                    // loads the model (once), resolves when it can run
 *   const r = await llmlabLive.run("The Eiffel Tower is in the city of");
 *   r.tokens, r.ids                              // the prompt's tokens as the book shows them, and ids
 *   r.next[0]                                    // {id, token, p}: the most likely next token (20 kept)
 *   r.attention(5, 6)                            // block 5, head 6: T x T weights, each row sums to 1
 *   r.lens[0], r.lens[30]                        // logit lens at the last position: embedding first,
 *                                                //   then after each block; 5 x {id, token, p} each
 *   await llmlabLive.run(p, {lensPositions: [-3, -2, -1], lensTarget: " Paris"})   // r.lensGrid
 *   await llmlabLive.run(p, {ablate: [[5, 6]], steer: {layer: 10, vector, scale: 4}, resid: 10})
 *   const g = await llmlabLive.generate("Once upon a time", {maxNewTokens: 30, temperature: 0.8,
 *                 topP: 0.9, seed: 1, onToken: t => console.log(t.text)});   // g.text, g.ids, g.timings
 *   await llmlabLive.generate("What is the capital of France?", {chat: true})   // ends at <|im_end|>, as does
 *                                                //   a text in the chat template (one that holds <|im_start|>)
 *   llmlabLive.token(7042)                       // "␣Paris": any id as the book shows tokens (once ready)
 *   await llmlabLive.tokenize("国王")            // ids, tokens and characters: needs the tokenizer only
 *
 * Where the files come from: llmlab.live writes them into _static/vendor/live/ as classic script
 * files (they load from file:// as well as from a web server; no fetch, nothing from the network).
 * The model runs in a Web Worker made from a Blob, on one thread (threads need cross-origin
 * isolation, which file:// pages cannot have), so the page never freezes while it computes. The
 * worker reads the big files itself where the browser lets it and keeps their bytes in IndexedDB,
 * so the next page of the book starts without reading them again. Leaving a page ends its worker (the
 * browser may keep the page for "back", and with it the weights); the next run starts a new one.
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
  var readyPromise = null, tokenizerPromise = null, worker = null, info = null, pending = {}, nextRequest = 1;

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

  async function manifest() {
    if (!window.llmlabLiveManifest) await loadScript(new URL("manifest.js", vendorBase).href);
    return window.llmlabLiveManifest;
  }
  async function ensure(key) {
    var m = await manifest(), F = window.llmlabLiveFiles;
    if (!(key in F)) {
      var file = m.files.filter(function (f) { return f.key === key; })[0];
      await loadScript(new URL(file.script, vendorBase).href);
    }
    return F[key];
  }

  // The tokenizer alone (1.3 MB), on the main thread: what the tokens view needs.
  function tokenizer() {
    if (!tokenizerPromise) {
      tokenizerPromise = ensure("tokenizer").then(function (spec) { return makeTokenizer(spec); })
        .catch(function (error) { tokenizerPromise = null; throw error; });
    }
    return tokenizerPromise;
  }

  function call(type, payload, onEvent) {
    return new Promise(function (resolve, reject) {
      var id = nextRequest++;
      if (!worker) { reject(new DOMException("The page was left while the live model started; run it again.", "AbortError")); return; }
      pending[id] = { resolve: resolve, reject: reject, onEvent: onEvent };
      worker.postMessage(Object.assign({ id: id, type: type }, payload));
    });
  }
  function lastRequest() { return nextRequest - 1; }
  // A binary file's text sits in a comment of a function never called (llmlab.live.site): String(fn) is
  // a slice of the script's own source, so reading it copies nothing.
  function textOf(fn) {
    var source = String(fn);
    return source.slice(source.indexOf("/*") + 2, source.lastIndexOf("*/"));
  }
  var HANDOVER_CHARS = 8 << 18;      // 2M characters (4 MB of text, 3.75 MB of bytes): 8 characters hold 15 bytes

  async function start() {
    var t0 = performance.now();
    var m = await manifest();
    var spec = await ensure("tokenizer");
    var ortSource = await ensure("ort.wasm.min.js"), mjs = await ensure("ort-wasm-simd-threaded.mjs");
    if (!window.llmlabKernelModule) await loadScript(new URL("kernel.js", liveBase).href);   // the decode kernel's side
    emit({ status: "starting", message: "starting the model's worker" });
    var source = [ortSource, "\n;\n", String(window.llmlabKernelModule), "\nvar llmlabKernel = llmlabKernelModule();\n",
                  String(makeTokenizer), "\n;(", String(workerMain), ")();\n"];
    var workerUrl = URL.createObjectURL(new Blob(source, { type: "text/javascript" }));
    worker = new Worker(workerUrl);
    URL.revokeObjectURL(workerUrl);
    workers.started++;
    worker.onmessage = function (event) {
      var msg = event.data, p = pending[msg.id];
      if (msg.type === "progress") { emit({ status: "loading", loaded: msg.loaded, total: msg.total, message: msg.message }); return; }
      if (!p) return;
      if (msg.event) { if (p.onEvent) p.onEvent(msg.event); return; }
      delete pending[msg.id];
      if (msg.error) p.reject(new Error(msg.error)); else p.resolve(msg);
    };
    worker.onerror = function (event) {
      emit({ status: "failed", message: String(event.message || event) });
    };
    var recipe = await ensure("model.expand.json");
    var big = m.files.filter(function (f) { return /^model\.(onnx|data\.|norms)|\.wasm$/.test(f.key); });
    var total = big.reduce(function (s, f) { return s + f.script_bytes; }, 0);
    emit({ status: "loading", loaded: 0, total: total, message: "loading the model files" });
    var config = { mjs: mjs, tokenizer: spec, manifest: m, digest: m.digest, recipe: recipe,
                   files: big.map(function (f) { return { key: f.key, url: new URL(f.script, vendorBase).href, script_bytes: f.script_bytes }; }) };
    var reply = await call("init", config);
    if (reply.need) {
      // The worker could not read the files itself (a file:// page): read them here, one at a time, and
      // hand each one over in slices of 4 MB that the worker decodes as they come. Only one file's text
      // is alive on this side, and never more than a slice of it on the worker's, whose memory must
      // also hold the weights' 540 MB.
      var F = window.llmlabLiveFiles, loaded = 0;
      for (var i = 0; i < big.length; i++) {
        await ensure(big[i].key);
        var file = F[big[i].key], text = textOf(file.text);
        delete F[big[i].key];
        for (var at = 0; at < text.length; at += HANDOVER_CHARS) {
          await call("part", { key: big[i].key, bytes: file.bytes, at: at, text: text.slice(at, at + HANDOVER_CHARS) });
        }
        file = text = null;
        loaded += big[i].script_bytes;
        emit({ loaded: loaded, message: "loaded " + big[i].script });
      }
      reply = await call("files", {});
    }
    info = { nLayers: m.n_layers, nHeads: m.n_heads, dModel: m.d_model, maxTokens: m.max_tokens, context: m.context,
             vocab: reply.vocab, model: m.model, source: reply.source,
             timings: Object.assign({ total_ms: performance.now() - t0 }, reply.timings) };
    emit({ status: "ready", message: "ready" });
    return info;
  }

  function ready() {
    if (!readyPromise) {
      var starting = readyPromise = start().catch(function (error) {
        if (readyPromise === starting) { stopWorker(); readyPromise = null; }
        emit({ status: "failed", message: error.message });
        throw error;
      });
    }
    return readyPromise;
  }

  // Leaving the page frees the model. A page the browser keeps for "back" (the back/forward cache) would
  // otherwise keep its worker, and the worker the runtime's copy of the weights (~0.7 GB), for every
  // chapter where the model ran. The worker ends on pagehide; the next run starts a new one, which reads
  // the weights from IndexedDB (kept across pages), not from the book's files.
  var workers = { started: 0, stopped: 0 };
  function stopWorker() {
    if (!worker) return false;
    worker.terminate();
    worker = null;
    workers.stopped++;
    readyPromise = null;
    var waiting = pending;
    pending = {};
    Object.keys(waiting).forEach(function (id) {
      waiting[id].reject(new DOMException("The page was left while the live model worked; run it again.", "AbortError"));
    });
    return true;
  }
  window.addEventListener("pagehide", function () {
    if (stopWorker()) emit({ status: "idle", loaded: 0, total: 0, message: "the model was freed when the page was left" });
  });

  /* ------------------------------------------------------------------ checking what the reader asks for */
  function describe(value) {
    if (value === null) return "null";
    if (value === undefined) return "undefined";
    if (typeof value === "number" || typeof value === "boolean") return String(value);
    if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "..." : value);
    if (Array.isArray(value)) return "an array of " + value.length;
    return "a " + (value.constructor && value.constructor.name || typeof value);
  }
  function checkIndex(what, value, n) {
    if (!Number.isInteger(value) || value < 0 || value >= n) {
      throw new RangeError(what + " must be an integer from 0 to " + (n - 1) + " (numbered from 0 like llmlab); got " +
                           describe(value) + ".");
    }
    return value;
  }
  function checkNumber(what, value, low, high, hint) {
    if (typeof value !== "number" || !isFinite(value) || value < low || value > high) {
      throw new RangeError(what + " must be a finite number from " + low + " to " + high + "; got " + describe(value) +
                           "." + (hint ? " " + hint : ""));
    }
    return value;
  }
  function checkPrompt(prompt, call) {
    if (typeof prompt !== "string") {
      throw new TypeError("llmlabLive." + call + "(prompt) takes a string; got " + (prompt === null ? "null" : typeof prompt) + ".");
    }
    if (!prompt.length) {
      throw new Error("The prompt is empty: type some text, e.g. llmlabLive." + call + "(\"The capital of France is\").");
    }
  }
  function checkOptions(options, allowed, call) {
    if (options === undefined || options === null) return {};
    if (typeof options !== "object" || Array.isArray(options)) {
      throw new TypeError("llmlabLive." + call + "'s options are an object like {" + allowed.slice(0, 3).join(", ") +
                          "}; got " + describe(options) + ".");
    }
    Object.keys(options).forEach(function (key) {
      if (allowed.indexOf(key) < 0) {
        throw new TypeError("llmlabLive." + call + " has no option " + JSON.stringify(key) + "; the options are " +
                            allowed.join(", ") + ".");
      }
    });
    return options;
  }
  // {ablate: [[layer, head], ...], steer: {layer, vector, scale}} -> what the worker feeds the graph.
  function interventions(options) {
    var L = info.nLayers, H = info.nHeads, D = info.dModel, out = { headMask: null, steer: null };
    if (options.ablate !== undefined && options.ablate !== null) {
      if (!Array.isArray(options.ablate)) {
        throw new TypeError("ablate is a list of [layer, head] pairs, e.g. {ablate: [[5, 6], [12, 3]]}; got " +
                            describe(options.ablate) + ".");
      }
      out.headMask = new Float32Array(L * H).fill(1);
      options.ablate.forEach(function (pair) {
        if (!Array.isArray(pair) || pair.length !== 2) {
          throw new TypeError("ablate is a list of [layer, head] pairs, e.g. [[5, 6]]; one entry is " + describe(pair) + ".");
        }
        if (!Number.isInteger(pair[0]) || pair[0] < 0 || pair[0] >= L || !Number.isInteger(pair[1]) || pair[1] < 0 || pair[1] >= H) {
          throw new RangeError("ablate: there is no head [" + pair.map(describe).join(", ") + "]; SmolLM2-135M has blocks 0 to " +
                               (L - 1) + " and heads 0 to " + (H - 1) + " in each.");
        }
        out.headMask[pair[0] * H + pair[1]] = 0;
      });
    }
    if (options.steer !== undefined && options.steer !== null) {
      var s = options.steer;
      if (typeof s !== "object" || Array.isArray(s)) {
        throw new TypeError("steer is an object {layer, vector, scale}, e.g. {layer: 10, vector: v, scale: 4}; got " + describe(s) + ".");
      }
      checkIndex("steer.layer (the block after which the vector is added)", s.layer, L);
      var v = s.vector;
      if (!v || typeof v.length !== "number") {
        throw new TypeError("steer.vector must be an array of " + D + " numbers (one per residual-stream dimension); got " +
                            describe(v) + ".");
      }
      if (v.length !== D) {
        throw new RangeError("steer.vector has " + v.length + " numbers; the residual stream of SmolLM2-135M has " + D +
                             " (d_model). Build one with llmlabLive.steeringVector(positive, negative, layer).");
      }
      var scale = s.scale === undefined ? 1 : s.scale;
      if (typeof scale !== "number" || !isFinite(scale)) {
        throw new RangeError("steer.scale must be a finite number (0 changes nothing, negative pushes the other way); got " +
                             describe(scale) + ".");
      }
      out.steer = new Float32Array(L * D);
      var f = Math.fround(scale);
      for (var i = 0; i < D; i++) {
        var x = Number(v[i]);
        if (!isFinite(x)) throw new RangeError("steer.vector[" + i + "] is " + describe(v[i]) + "; every entry must be a finite number.");
        out.steer[s.layer * D + i] = Math.fround(f * Math.fround(x));          // as llmlab: scale * vector in float32
      }
    }
    return out;
  }

  var RUN_OPTIONS = ["ablate", "steer", "resid", "attention", "lensPositions", "lensLast", "lensTarget"];
  async function run(prompt, options) {
    checkPrompt(prompt, "run");
    options = checkOptions(options, RUN_OPTIONS, "run");
    await ready();
    var iv = interventions(options);
    var residLayer = null;
    if (options.resid !== undefined && options.resid !== null) {
      residLayer = checkIndex("resid (the block after which to return the residual stream)", options.resid, info.nLayers);
    }
    var positions = options.lensPositions === undefined ? [-1] : options.lensPositions, lensLast = null;
    if (options.lensLast !== undefined && options.lensLast !== null) {
      if (!Number.isInteger(options.lensLast) || options.lensLast < 1 || options.lensLast > 16) {
        throw new RangeError("lensLast (the lens at the last n positions) must be a whole number from 1 to 16; got " +
                             describe(options.lensLast) + ".");
      }
      lensLast = options.lensLast;
    }
    if (!Array.isArray(positions) || positions.some(function (p) { return !Number.isInteger(p); })) {
      throw new TypeError("lensPositions is a list of token positions (negative ones count from the end), e.g. [-3, -2, -1]; got " +
                          describe(positions) + ".");
    }
    var target = null;
    if (options.lensTarget !== undefined && options.lensTarget !== null) {
      target = options.lensTarget;
      if (typeof target === "string") {
        var ids = (await tokenizer()).encode(target);
        if (ids.length !== 1) {
          throw new Error("lensTarget must be one token; " + JSON.stringify(target) + " is " + ids.length + " tokens (" +
                          ids.map(function (id) { return info.vocab[id]; }).join(" ") + "). Try it with or without a leading space.");
        }
        target = ids[0];
      }
      checkIndex("lensTarget (a token id)", target, info.vocab.length);
    }
    var m = await call("run", { prompt: prompt, headMask: iv.headMask, steer: iv.steer, positions: positions, target: target,
                                lensLast: lensLast,
                                attention: options.attention !== false });
    var T = m.ids.length, L = m.nLayers, H = m.nHeads, att = m.attention, D = info.dModel;
    var result = {
      prompt: prompt, ids: m.ids, tokens: m.tokens, chars: m.groups, next: m.next, lens: m.lens, lensGrid: m.lensGrid,
      logits: m.logits,              // Float32Array (vocab): the next token's logits, for the sampling view
      attentionArray: att,           // Float32Array (layers, heads, T, T): what attention(layer, head) reads
      residArray: m.resid,           // Float32Array (layers + 1, d_model): the last position, embedding first
      nLayers: L, nHeads: H, ms: m.ms,
      attention: function (layer, head) {
        checkIndex("layer", layer, L);
        checkIndex("head", head, H);
        if (!att.length) throw new Error("This run was made with {attention: false}; run again without it to read attention.");
        var rows = [], base = (layer * H + head) * T * T;
        for (var i = 0; i < T; i++) rows.push(Array.from(att.subarray(base + i * T, base + (i + 1) * T)));
        return rows;
      }
    };
    if (residLayer !== null) result.resid = Array.from(m.resid.subarray((residLayer + 1) * D, (residLayer + 2) * D));
    return result;
  }

  var GENERATE_OPTIONS = ["maxNewTokens", "temperature", "topK", "topP", "minP", "repetitionPenalty", "seed", "chat",
                          "stop", "onToken", "signal", "ablate", "steer", "cache"];
  async function generate(prompt, options) {
    checkPrompt(prompt, "generate");
    options = checkOptions(options, GENERATE_OPTIONS, "generate");
    var o = {
      maxNewTokens: options.maxNewTokens === undefined ? 40 : options.maxNewTokens,
      temperature: options.temperature === undefined ? 0 : options.temperature,
      topK: options.topK || null, topP: options.topP === undefined || options.topP === null ? null : options.topP,
      minP: options.minP === undefined || options.minP === null ? null : options.minP,
      repetitionPenalty: options.repetitionPenalty === undefined || options.repetitionPenalty === null ? null : options.repetitionPenalty,
      seed: options.seed === undefined || options.seed === null ? null : options.seed,
      chat: !!options.chat, stop: options.stop === undefined || options.stop === null ? [] : options.stop,
      cache: options.cache !== false
    };
    if (!Number.isInteger(o.maxNewTokens) || o.maxNewTokens < 1) {
      throw new RangeError("maxNewTokens must be a whole number of tokens, at least 1; got " + describe(o.maxNewTokens) + ".");
    }
    checkNumber("temperature", o.temperature, 0, 100, "0 means greedy (always the top token); 1 samples the model's own distribution.");
    if (o.topK !== null && (!Number.isInteger(o.topK) || o.topK < 1)) {
      throw new RangeError("topK must be a whole number >= 1 (or 0 / null for no filter); got " + describe(o.topK) + ".");
    }
    if (o.topP !== null && (checkNumber("topP", o.topP, 0, 1, "topP keeps the likeliest tokens until they add up to p.") === 0)) {
      throw new RangeError("topP must be above 0 (1 or null: no filter); got 0.");
    }
    if (o.minP !== null) checkNumber("minP", o.minP, 0, 1, "minP keeps tokens at least minP times as likely as the top one.");
    if (o.repetitionPenalty !== null) {
      checkNumber("repetitionPenalty", o.repetitionPenalty, 1e-6, 100, "1.0 changes nothing; 1.1-1.3 is usual.");
    }
    if (o.seed !== null && !Number.isInteger(o.seed)) throw new TypeError("seed must be an integer; got " + describe(o.seed) + ".");
    if (typeof o.stop === "string") o.stop = [o.stop];
    if (!Array.isArray(o.stop) || o.stop.some(function (s) { return typeof s !== "string" || !s.length; })) {
      throw new TypeError("stop is a string or a list of non-empty strings where writing ends; got " + describe(options.stop) + ".");
    }
    if (options.onToken !== undefined && typeof options.onToken !== "function") {
      throw new TypeError("onToken must be a function called with each new token; got " + describe(options.onToken) + ".");
    }
    var signal = options.signal;
    if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
      throw new TypeError("signal must be an AbortSignal (new AbortController().signal); got " + describe(signal) + ".");
    }
    await ready();
    if (o.maxNewTokens > info.context - 1) {
      throw new RangeError("maxNewTokens is " + o.maxNewTokens + "; the live model holds " + info.context +
                           " tokens in all (prompt + new ones). Ask for fewer.");
    }
    var iv = interventions(options);
    if (signal && signal.aborted) throw new DOMException("The generation was stopped before it started.", "AbortError");
    var promise = call("generate", Object.assign({ prompt: prompt, headMask: iv.headMask, steer: iv.steer }, o),
                       function (event) { if (options.onToken) options.onToken(event); });
    var id = lastRequest();
    var onAbort = function () { if (worker) worker.postMessage({ type: "cancel", target: id }); };
    if (signal) signal.addEventListener("abort", onAbort);
    try {
      var m = await promise;
    } finally {
      if (signal) signal.removeEventListener("abort", onAbort);
    }
    return { prompt: prompt, promptIds: m.promptIds, ids: m.ids, tokens: m.tokens, text: m.text, stopped: m.stopped,
             steps: m.steps, timings: m.timings };
  }

  // Difference of means of the residual stream after block `layer` at the last token (llmlab's steering_vector).
  async function steeringVector(positive, negative, layer) {
    [positive, negative].forEach(function (list, k) {
      if (!Array.isArray(list) || !list.length || list.some(function (p) { return typeof p !== "string" || !p.length; })) {
        throw new TypeError("steeringVector(positive, negative, layer) takes two non-empty lists of prompts; the " +
                            (k ? "second" : "first") + " is " + describe(list) + ".");
      }
    });
    await ready();
    checkIndex("layer", layer, info.nLayers);
    async function mean(list) {
      var sum = new Float64Array(info.dModel);
      for (var i = 0; i < list.length; i++) {
        var r = await run(list[i], { resid: layer, attention: false, lensPositions: [] });
        r.resid.forEach(function (x, j) { sum[j] += x; });
      }
      return Array.from(sum, function (x) { return x / list.length; });
    }
    var a = await mean(positive), b = await mean(negative);
    return a.map(function (x, j) { return x - b[j]; });
  }

  window.llmlabLive = {
    ready: ready,
    run: run,
    generate: generate,
    steeringVector: steeringVector,
    tokenize: async function (text) {
      if (typeof text !== "string") throw new TypeError("llmlabLive.tokenize(text) takes a string; got " + describe(text) + ".");
      var t = await tokenizer(), ids = t.encode(text);
      return { ids: ids, tokens: ids.map(t.show), chars: t.groups(ids) };
    },
    decode: async function (ids) { return (await tokenizer()).decode(ids); },
    status: function () { return Object.assign({ workers: Object.assign({ alive: !!worker }, workers) }, state); },
    info: function () { return info; },
    token: function (id) { return info ? info.vocab[id] : undefined; }
  };

  /* ------------------------------------------------------------------ the tokenizer (runs in the worker and the page)
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
    function bytesOf(ids) {
      var n = 0, i;
      for (i = 0; i < ids.length; i++) n += tokenBytes[ids[i]].length;
      var out = new Uint8Array(n), at = 0;
      for (i = 0; i < ids.length; i++) { out.set(tokenBytes[ids[i]], at); at += tokenBytes[ids[i]].length; }
      return out;
    }
    // The text of ids (llmlab's tokenizer.decode; a character cut at the end shows as U+FFFD).
    function decode(ids) { return new TextDecoder("utf-8").decode(bytesOf(ids)); }
    // Does `bytes` end inside a UTF-8 character?
    function endsInside(bytes) {
      for (var back = 1; back <= Math.min(4, bytes.length); back++) {
        var b0 = bytes[bytes.length - back];
        if ((b0 & 0xC0) === 0x80) continue;                    // a continuation byte: look further back
        var need = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 1;
        return need > back;
      }
      return false;
    }
    // For each token, the run of tokens [start, end) that together make whole characters, and their
    // text: the two tokens <e5><9b> and <bd> of "国" both get {start: k, end: k + 2, text: "国"}.
    function groups(ids) {
      var out = [], k = 0;
      while (k < ids.length) {
        var end = k + 1, bytes = Array.from(tokenBytes[ids[k]]);
        while (end < ids.length && !specialIds.has(ids[end]) &&
               (endsInside(bytes) || (tokenBytes[ids[end]].length && (tokenBytes[ids[end]][0] & 0xC0) === 0x80))) {
          tokenBytes[ids[end]].forEach(function (x) { bytes.push(x); });
          end++;
        }
        var text = end - k > 1 ? decodeBytes(Uint8Array.from(bytes)) : null;
        for (var j = k; j < end; j++) out.push({ start: k, end: end, text: text });
        k = end;
      }
      return out;
    }
    return { encode: encode, show: show, decode: decode, bytesOf: bytesOf, groups: groups, size: spec.tokens.length,
             specialIds: specialIds };
  }

  /* ------------------------------------------------------------------ the worker */
  function workerMain() {
    var session = null, kernel = null, ortFiles = null, tokenizer = null, vocab = null, cfg = null, dims = null,
        cancelled = {};
    var queue = Promise.resolve();
    self.llmlabLiveFiles = {};

    // llmlab.live.site's text form: 15-bit numbers written as characters U+3000 + n.
    // decode15Into: the text's bytes written into out from byte j (a text that starts at a multiple of
    // 8 characters starts at a whole byte: 8 characters are 120 bits, 15 bytes).
    function decode15Into(text, out, j) {
      var n = out.length, acc = 0, bits = 0;
      for (var i = 0; i < text.length && j < n; i++) {
        acc = (acc << 15) | (text.charCodeAt(i) - 0x3000);
        bits += 15;
        while (bits >= 8 && j < n) { bits -= 8; out[j++] = (acc >>> bits) & 255; }
        acc &= (1 << bits) - 1;
      }
      return out;
    }
    function decode15(file) { return decode15Into(file.text, new Uint8Array(file.bytes), 0); }
    function progress(loaded, total, message) { self.postMessage({ type: "progress", loaded: loaded, total: total, message: message }); }

    // IndexedDB: the decoded files under the build's digest (one entry; an older build's is dropped).
    function database() {
      return new Promise(function (resolve, reject) {
        var request = indexedDB.open("llmlab-live", 1);
        request.onupgradeneeded = function () { request.result.createObjectStore("files"); };
        request.onsuccess = function () { resolve(request.result); };
        request.onerror = function () { reject(request.error); };
      });
    }
    // One entry per file (each written in its own transaction, so that only one file at a time is being
    // serialized), then the list of files under the digest: present only once every file is in.
    function request(db, mode, action) {
      return new Promise(function (resolve) {
        var tx = db.transaction("files", mode), result = null, r = action(tx.objectStore("files"));
        if (r) r.onsuccess = function () { result = r.result; };
        tx.oncomplete = function () { resolve(mode === "readonly" ? result : true); };
        tx.onerror = tx.onabort = function () { resolve(mode === "readonly" ? null : false); };
      });
    }
    async function cached(digest) {
      try {
        var db = await database(), keys = await request(db, "readonly", function (store) { return store.get(digest); });
        if (!Array.isArray(keys)) return null;
        var bytes = {};
        for (var i = 0; i < keys.length; i++) {
          bytes[keys[i]] = await request(db, "readonly", function (store) { return store.get(digest + " " + keys[i]); });
          if (!bytes[keys[i]]) return null;
        }
        return bytes;
      } catch (error) { return null; }
    }
    async function keep(digest, bytes) {
      try {
        var db = await database(), keys = Object.keys(bytes);
        if (!await request(db, "readwrite", function (store) { store.clear(); })) return false;
        for (var i = 0; i < keys.length; i++) {
          if (!await request(db, "readwrite", function (store) { store.put(bytes[keys[i]], digest + " " + keys[i]); })) return false;
        }
        return await request(db, "readwrite", function (store) { store.put(keys, digest); });
      } catch (error) { return false; }
    }
    // A script file read as bytes (http only: workers may not read file:// URLs): its string, decoded.
    async function readScript(f) {
      var response = await fetch(f.url);
      if (!response.ok) throw new Error("HTTP " + response.status + " for " + f.url);
      var text = new TextDecoder("utf-16le").decode(await response.arrayBuffer());
      var start = text.indexOf("/*") + 2, end = text.lastIndexOf("*/");      // llmlab.live.site's comment
      var n = Number(/bytes: (\d+)/.exec(text)[1]);
      return decode15({ text: text.slice(start, end), bytes: n });
    }

    async function init(m) {
      cfg = m;
      var t0 = performance.now();
      tokenizer = makeTokenizer(m.tokenizer);
      vocab = [];
      for (var i = 0; i < tokenizer.size; i++) vocab.push(tokenizer.show(i));
      var mf = m.manifest;
      dims = { L: mf.n_layers, H: mf.n_heads, KV: mf.n_kv_heads, hd: mf.head_dim, D: mf.d_model, V: tokenizer.size,
               maxTokens: mf.max_tokens, context: mf.context };
      var bytes = await cached(m.digest), source = "indexeddb";
      if (!bytes) {
        if (!/^https?:/.test(m.files[0].url)) return { need: true };
        bytes = {};
        var loaded = 0, total = m.files.reduce(function (s, f) { return s + f.script_bytes; }, 0);
        for (var k = 0; k < m.files.length; k++) {
          bytes[m.files[k].key] = await readScript(m.files[k]);
          loaded += m.files[k].script_bytes;
          progress(loaded, total, "read " + m.files[k].key);
        }
        source = "worker";
      }
      return start(bytes, source, performance.now() - t0);
    }
    var handedBytes = {}, handedMs = 0;
    async function part(m) {                 // a slice of one file's text from the page (file://), decoded
      var t0 = performance.now();
      if (m.at % 8) throw new Error("a slice of " + m.key + " starts at character " + m.at + ", not a multiple of 8.");
      if (!handedBytes[m.key]) handedBytes[m.key] = new Uint8Array(m.bytes);
      decode15Into(m.text, handedBytes[m.key], m.at / 8 * 15);
      m.text = null;
      handedMs += performance.now() - t0;
      return {};
    }
    async function files() {
      var bytes = handedBytes;
      handedBytes = {};
      return start(bytes, "page", handedMs);
    }
    // Ready to write: the decode kernel (decode.wasm, kernel.js) gets the GGUF blocks, copied into its
    // memory once, and this side lets its copies go. onnxruntime, which the views need (attention, lens,
    // knock-outs, steering of a run), starts the first time a view runs (views()), so a page that only
    // writes never holds the float32 weights.
    async function start(bytes, source, filesMs) {
      var t0 = performance.now(), timings = { files_ms: filesMs };
      var stored = source === "indexeddb" ? true : await keep(cfg.digest, bytes);
      timings.store_ms = performance.now() - t0;
      var t1 = performance.now();
      kernel = llmlabKernel(bytes["decode.wasm"], cfg.recipe, function (file, start, length) {
        return length === null ? bytes[file] : bytes[file].subarray(start, start + length);
      });
      Object.keys(bytes).forEach(function (key) {
        if (/^model\.(data\.|norms)|^decode\.wasm$/.test(key)) { release(bytes[key]); bytes[key] = null; }
      });
      timings.kernel_ms = performance.now() - t1;
      ortFiles = { graph: bytes["model.onnx"], runtime: bytes["ort-wasm-simd-threaded.wasm"] };
      return { vocab: vocab, source: source, stored: stored, timings: timings };
    }
    async function views() {
      if (session) return session;
      var ort = self.ort;
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.proxy = false;
      ort.env.wasm.wasmPaths = { mjs: URL.createObjectURL(new Blob([cfg.mjs], { type: "text/javascript" })) };
      ort.env.wasm.wasmBinary = ortFiles.runtime;
      // The float32 weights are never whole in this worker's memory: onnxruntime copies each
      // initializer into its own (WebAssembly) memory by asking the mounted file for that tensor's
      // byte range, and the range is expanded from the kernel's blocks at that moment (see LazyWeights).
      var weights = new LazyWeights(cfg.recipe, kernel);
      var made = await ort.InferenceSession.create(ortFiles.graph, {
        executionProviders: ["wasm"], graphOptimizationLevel: "basic",
        externalData: [{ path: cfg.recipe.file, data: weights }],
        extra: { session: { disable_prepacking: "1" } }      // no second, repacked copy of the 540 MB
      });
      if (weights.copied !== cfg.recipe.bytes) {
        throw new Error("onnxruntime-web read " + weights.copied + " bytes of expanded weights, not the model's " +
                        cfg.recipe.bytes + ": it no longer reads external data by byte ranges (its version is pinned " +
                        "in web/package.json; see LazyWeights in llmlab-live.js).");
      }
      release(weights.scratch);
      weights.scratch = null;
      ort.env.wasm.wasmBinary = undefined;             // compiled by now
      ortFiles = null;
      session = made;
      return session;
    }

    // The float32 weights from the GGUF's blocks (llmlab.live.export.expand_blocks): Q4_1 blocks of 20
    // bytes (d, m as float16, then 16 bytes: element j low nibble, j + 16 high) give d * q + m; Q8_0
    // blocks of 34 bytes (d, then 32 int8) give d * q. Both exact as in numpy. One weight w of the recipe,
    // written transposed, (cols, rows): element (n, k) of w at k * rows + n.
    var HALF = null;
    function expandWeight(w, src, w32) {
      if (!HALF) {
        HALF = new Float32Array(65536);
        for (var h = 0; h < 65536; h++) {
          var sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
          HALF[h] = e === 0 ? sign * f * Math.pow(2, -24) : e === 31 ? (f ? NaN : sign * Infinity)
                                                                     : sign * (1 + f / 1024) * Math.pow(2, e - 15);
        }
      }
      var half = HALF, N = w.rows, nb = w.cols / 32, n, kb, j, base = 0, d, m, x, at;
      for (n = 0; n < N; n++) {
        for (kb = 0; kb < nb; kb++) {
          at = kb * 32 * N + n;
          d = half[src[base] | (src[base + 1] << 8)];
          if (w.kind === "q4_1") {
            m = half[src[base + 2] | (src[base + 3] << 8)];
            for (j = 0; j < 16; j++) {
              x = src[base + 4 + j];
              w32[at + j * N] = d * (x & 15) + m;
              w32[at + (j + 16) * N] = d * (x >> 4) + m;
            }
            base += 20;
          } else {
            for (j = 0; j < 32; j++) { x = src[base + 2 + j]; w32[at + j * N] = d * (x > 127 ? x - 256 : x); }
            base += 34;
          }
        }
      }
      return new Uint8Array(w32.buffer, 0, w.rows * w.cols * 4);
    }
    // weights.f32 as onnxruntime-web mounts it, without its 540 MB ever being whole in JavaScript. The
    // runtime (1.30, pinned) looks up the mounted file, checks byteLength, and copies each initializer with
    // HEAPU8.set(file.subarray(offset, offset + length)) at once: this byte array answers subarray by
    // expanding the weight that range covers, from the blocks the decode kernel holds, into one reused
    // buffer (as large as the largest weight: a 7 MB slice of the embedding), so the page's memory holds
    // the runtime's copy and the quantized blocks, not twice the weights, and expanding leaves no garbage.
    class LazyWeights extends Uint8Array {
      constructor(recipe, kernel) {
        super(0);
        this.recipe = recipe;
        this.kernel = kernel;
        this.copied = 0;
        this.ms = 0;
        this.scratch = new Float32Array(Math.max.apply(null, recipe.weights.map(function (w) { return w.rows * w.cols; })));
      }
      get byteLength() { return this.recipe.bytes; }
      get length() { return this.recipe.bytes; }
      subarray(begin, end) {
        var t0 = performance.now(), kernel = this.kernel, scratch = this.scratch, out = null;
        this.recipe.weights.forEach(function (w) {
          var lo = Math.max(begin, w.offset), hi = Math.min(end, w.offset + w.rows * w.cols * 4);
          if (lo >= hi) return;
          var expanded = expandWeight(w, kernel.blocks(w), scratch);
          if (lo === begin && hi === end) { out = expanded.subarray(lo - w.offset, hi - w.offset); return; }  // the usual case
          out = out || new Uint8Array(end - begin);
          out.set(expanded.subarray(lo - w.offset, hi - w.offset), lo - begin);
        });
        out = out || new Uint8Array(end - begin);
        this.copied += end - begin;
        this.ms += performance.now() - t0;
        return out;
      }
    }

    // Gives an array's memory back at once, not at the next garbage collection (which may come after the
    // runtime's memory has grown by the whole model): ArrayBuffer.prototype.transfer(0) empties it.
    function release(array) {
      if (array && array.buffer && typeof array.buffer.transfer === "function" && !array.buffer.detached) array.buffer.transfer(0);
    }
    function releaseOutputs(out) { Object.keys(out).forEach(function (name) { release(out[name].data); }); }
    function int64(values) { return new self.ort.Tensor("int64", BigInt64Array.from(values.map(BigInt)), [values.length]); }
    function forward(ids, past, headMask, steer, attentionRows, readoutRows, target) {
      var d = dims, T = self.ort.Tensor;
      var empty = function () { return new T("float32", new Float32Array(0), [d.L, d.KV, 0, d.hd]); };
      return session.run({
        input_ids: int64(ids),
        past_keys: past ? past.keys : empty(), past_values: past ? past.values : empty(),
        head_mask: new T("float32", headMask || new Float32Array(d.L * d.H).fill(1), [d.L, d.H]),
        steer: new T("float32", steer || new Float32Array(d.L * d.D), [d.L, d.D]),
        attention_rows: int64([attentionRows]), readout_rows: int64(readoutRows), lens_target: int64([target || 0])
      });
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
    function softmax(logits) {
      var max = -Infinity, i, out = new Float32Array(logits.length), sum = 0;
      for (i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
      for (i = 0; i < logits.length; i++) { out[i] = Math.exp(logits[i] - max); sum += out[i]; }
      for (i = 0; i < logits.length; i++) out[i] /= sum;
      return out;
    }
    function promptIds(text, limit, what) {
      var ids = tokenizer.encode(text);
      if (!ids.length) throw new Error("The prompt " + JSON.stringify(text) + " gives no tokens; type some text.");
      if (ids.length > limit) {
        throw new Error("The prompt is " + ids.length + " tokens long; " + what.replace("%d", limit) + ". Shorten it.");
      }
      return ids;
    }

    async function run(m) {
      var d = dims, ids = promptIds(m.prompt, d.maxTokens, "llmlabLive.run (what the views call) reads at most %d");
      var T = ids.length, wanted = m.positions;
      if (m.lensLast) {
        wanted = [];
        for (var q = Math.max(0, T - m.lensLast); q < T; q++) wanted.push(q);
      }
      var positions = wanted.map(function (p) {
        if (p < -T || p >= T) {
          throw new Error("lensPositions: there is no position " + p + "; the prompt has " + T + " tokens (0 to " + (T - 1) +
                          ", or -" + T + " to -1 from the end).");
        }
        return p < 0 ? T + p : p;
      });
      var rows = [d.L * T + T - 1];
      for (var layer = 0; layer <= d.L; layer++) positions.forEach(function (p) { rows.push(layer * T + p); });
      var t0 = performance.now();
      await views();
      var out = await forward(ids, null, m.headMask, m.steer, m.attention ? T : 0, rows, m.target);
      var ms = performance.now() - t0;
      var logits = out.logits.data, probs = softmax(logits), k = out.lens_ids.dims[1], n = positions.length;
      var next = top(probs, 20).map(function (id) { return { id: id, token: vocab[id], p: probs[id] }; });
      var grid = { positions: positions, ids: [], tokens: [], probs: [], targetProbs: m.target === null ? null : [],
                   targetRanks: m.target === null ? null : [], target: m.target };
      for (layer = 0; layer <= d.L; layer++) {
        var ids_ = [], toks = [], ps = [], tp = [], tr = [];
        for (var c = 0; c < n; c++) {
          var row = 1 + layer * n + c, rid = [], rtok = [], rp = [];
          for (var j = 0; j < k; j++) {
            var id = Number(out.lens_ids.data[row * k + j]);
            rid.push(id); rtok.push(vocab[id]); rp.push(out.lens_probs.data[row * k + j]);
          }
          ids_.push(rid); toks.push(rtok); ps.push(rp);
          tp.push(out.lens_target_probs.data[row]); tr.push(Number(out.lens_target_ranks.data[row]));
        }
        grid.ids.push(ids_); grid.tokens.push(toks); grid.probs.push(ps);
        if (m.target !== null) { grid.targetProbs.push(tp); grid.targetRanks.push(tr); }
      }
      var last = positions.indexOf(T - 1), lens = null;
      if (last >= 0) {
        lens = grid.ids.map(function (r, l) {
          return r[last].map(function (id, j) { return { id: id, token: vocab[id], p: grid.probs[l][last][j] }; });
        });
      }
      var attention = out.attention.data, resid = out.resid.data;
      return {
        reply: { ids: ids, tokens: ids.map(function (id) { return vocab[id]; }), groups: tokenizer.groups(ids), next: next,
                 lens: lens, lensGrid: grid, attention: attention, logits: logits, resid: resid, nLayers: d.L, nHeads: d.H, ms: ms },
        transfer: [attention.buffer, logits.buffer, resid.buffer]
      };
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
    function breathe() {               // let a "cancel" message in between two tokens
      return new Promise(function (resolve) { setTimeout(resolve, 0); });
    }
    var CHAT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

    function specialId(name) {
      var found = -1;
      tokenizer.specialIds.forEach(function (text, id) { if (text === name) found = id; });
      return found;
    }
    // A text's tokens through the decode kernel from position 0, at most kernel.maxTokens at a time:
    // the last token's logits, and the cache filled.
    function feed(ids) {
      var logits = null;
      for (var at = 0; at < ids.length; at += kernel.maxTokens) {
        release(logits);
        logits = kernel.forward(ids.slice(at, at + kernel.maxTokens), at);
      }
      return logits;
    }
    async function generate(m) {
      var d = dims;
      var text = m.chat ? "<|im_start|>system\n" + CHAT_SYSTEM + "<|im_end|>\n<|im_start|>user\n" + m.prompt +
                          "<|im_end|>\n<|im_start|>assistant\n" : m.prompt;
      var ids = promptIds(text, d.context - m.maxNewTokens, "with maxNewTokens = " + m.maxNewTokens + ", generate takes at most %d " +
                          "(the live model holds " + d.context + " tokens in all" + (m.chat ? ", the chat template included" : "") + ")");
      // <|endoftext|> ends a text; <|im_end|> ends a turn of a conversation: a chat, or a text written in
      // the chat template (it holds <|im_start|>), which would otherwise go on with the next turn's header
      var imStart = specialId("<|im_start|>"), imEnd = specialId("<|im_end|>");
      var conversation = m.chat || (imStart >= 0 && ids.indexOf(imStart) >= 0);
      var eos = conversation && imEnd >= 0 ? [imEnd, 0] : [0];
      var random = generator(m.seed === null ? Math.floor(Math.random() * 4294967296) : m.seed);
      var seen = new Uint8Array(d.V);
      ids.forEach(function (id) { seen[id] = 1; });
      var all = ids.slice(), written = [], steps = [], stopped = "length", text_ = "", shownText = "";
      kernel.interventions(m.headMask, m.steer);
      var t0 = performance.now();
      var logits = feed(ids);
      var prefillMs = performance.now() - t0, stepMs = prefillMs;
      for (var step = 0; step < m.maxNewTokens; step++) {
        var c = choose(logits, m, random, seen);
        all.push(c.id);
        seen[c.id] = 1;
        var done = eos.indexOf(c.id) >= 0;
        if (!done) written.push(c.id);
        var full = tokenizer.decode(written), hit = -1;
        m.stop.forEach(function (s) { var at = full.indexOf(s); if (at >= 0 && (hit < 0 || at < hit)) hit = at; });
        if (hit >= 0) full = full.slice(0, hit);
        // stream only whole characters: a character cut between two tokens decodes as U+FFFD until its last piece
        var whole = hit >= 0 || done || step === m.maxNewTokens - 1 ? full : full.replace(/\uFFFD+$/, "");
        var piece = whole.length > shownText.length ? whole.slice(shownText.length) : "";
        if (whole.length > shownText.length) shownText = whole;
        text_ = full;
        var S = all.length - 1;                            // keys in the cache once this token's step ran
        self.postMessage({ id: m.id, event: { index: step, id: c.id, token: vocab[c.id], text: piece,
          p: c.p, pModel: c.pModel, kept: c.kept, ms: stepMs, cacheTokens: m.cache ? S : 0,
          cacheBytes: m.cache ? 2 * d.L * d.KV * S * d.hd * 4 : 0 } });
        if (done) { stopped = "eos"; break; }
        if (hit >= 0) { stopped = "stop"; break; }
        if (step === m.maxNewTokens - 1) break;
        await breathe();
        if (cancelled[m.id]) { stopped = "aborted"; break; }
        var t1 = performance.now(), before = logits;
        // with the cache: the new token alone, after the all.length - 1 cached ones; without: every token again
        logits = m.cache ? kernel.forward([c.id], all.length - 1) : feed(all);
        release(before);                // the last step's logits, read by now: given back at once
        stepMs = performance.now() - t1;
        steps.push(stepMs);
      }
      delete cancelled[m.id];
      release(logits);
      var mean = steps.length ? steps.reduce(function (a, b) { return a + b; }, 0) / steps.length : null;
      var newIds = all.slice(ids.length);
      return { promptIds: ids, ids: newIds, tokens: newIds.map(function (id) { return vocab[id]; }), text: text_, stopped: stopped,
               steps: steps, timings: { prefill_ms: prefillMs, ms_per_token: mean, tokens_per_s: mean ? 1000 / mean : null,
                                        prompt_tokens: ids.length, cache: m.cache } };
    }

    var handlers = { init: init, part: part, files: files, run: run, generate: generate };
    self.onmessage = function (event) {
      var m = event.data;
      if (m.type === "cancel") { cancelled[m.target] = true; return; }
      queue = queue.then(async function () {
        try {
          var r = await handlers[m.type](m);
          if (r.reply) self.postMessage(Object.assign({ id: m.id }, r.reply), r.transfer);
          else self.postMessage(Object.assign({ id: m.id }, r));
        } catch (error) {
          self.postMessage({ id: m.id, error: String(error && error.message || error) });
        }
      });
    };
  }
})();
