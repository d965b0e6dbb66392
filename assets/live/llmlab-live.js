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
 *
 * This file is the page's side: the API above and the checks of what the reader asks for. The rest of
 * the runtime sits next to it, one role a file, each loaded when first needed: tokenizer.js (the BPE
 * tokenizer, page and worker), worker.js (the Web Worker: its protocol, the files, the views' onnxruntime
 * session), sampler.js (temperature, top-k, top-p, min-p, a seeded draw), kernel.js (the decode kernel,
 * llmlab/live/decode.c built to decode.wasm, which generate() runs).
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

  // The runtime's other files, next to this one (classic scripts: they load from file:// too): each defines
  // one global function (`name`).
  function code(file, name) {
    return window[name] ? Promise.resolve() : loadScript(new URL(file, liveBase).href);
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
      tokenizerPromise = Promise.all([ensure("tokenizer"), code("tokenizer.js", "llmlabMakeTokenizer")])
        .then(function (got) { return window.llmlabMakeTokenizer(got[0]); })
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
    await Promise.all([code("kernel.js", "llmlabKernelModule"), code("tokenizer.js", "llmlabMakeTokenizer"),
                       code("sampler.js", "llmlabSamplerModule"), code("worker.js", "llmlabWorkerMain")]);
    emit({ status: "starting", message: "starting the model's worker" });
    var source = [ortSource, "\n;\n", String(window.llmlabKernelModule), "\nvar llmlabKernel = llmlabKernelModule();\n",
                  String(window.llmlabMakeTokenizer), "\n", String(window.llmlabSamplerModule), "\n;(",
                  String(window.llmlabWorkerMain), ")();\n"];
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

})();
