/* The live model's Web Worker: the protocol the page speaks to it (init, part, files, run, generate,
 * cancel), the model's files (read, decoded, kept in IndexedDB), the decode kernel that writes
 * (kernel.js) and the onnxruntime session that the views read (started on their first run).
 * The page builds the worker from a Blob: onnxruntime-web, String(llmlabKernelModule),
 * String(llmlabMakeTokenizer), String(llmlabSamplerModule), then (String(llmlabWorkerMain))().
 */
function llmlabWorkerMain() {
  var session = null, kernel = null, ortFiles = null, tokenizer = null, vocab = null, cfg = null, dims = null,
      cancelled = {};
  var queue = Promise.resolve();
  var sampler = llmlabSamplerModule(release), top = sampler.top, softmax = sampler.softmax,
      generator = sampler.generator, choose = sampler.choose;
  self.llmlabLiveFiles = {};

  // llmlab.live.site's text form: 15-bit numbers written as characters U+3000 + n.
  // decode15Into: the characters from..to of text (a string, or a Uint16Array of UTF-16 code units) as
  // bytes, written into out from byte j (a text that starts at a multiple of 8 characters starts at a
  // whole byte: 8 characters are 120 bits, 15 bytes).
  function decode15Into(text, from, to, out, j) {
    var n = out.length, acc = 0, bits = 0, units = typeof text === "string" ? null : text;
    for (var i = from; i < to && j < n; i++) {
      acc = (acc << 15) | ((units ? units[i] : text.charCodeAt(i)) - 0x3000);
      bits += 15;
      while (bits >= 8 && j < n) { bits -= 8; out[j++] = (acc >>> bits) & 255; }
      acc &= (1 << bits) - 1;
    }
    return out;
  }
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
  // A script file read as bytes (http only: workers may not read file:// URLs), decoded from its UTF-16
  // code units where they lie: no string of the file is made, and the response is freed at once.
  async function readScript(f) {
    var response = await fetch(f.url);
    if (!response.ok) throw new Error("HTTP " + response.status + " for " + f.url);
    var buffer = await response.arrayBuffer(), units = new Uint16Array(buffer);
    // the header, BOM kept (ignoreBOM), so that its character i is units[i]
    var head = new TextDecoder("utf-16le", { ignoreBOM: true }).decode(units.subarray(0, 256));
    var start = head.indexOf("/*") + 2, end = units.length;               // llmlab.live.site's comment
    while (end > start && !(units[end - 2] === 0x2A && units[end - 1] === 0x2F)) end--;
    var out = decode15Into(units, start, end - 2, new Uint8Array(Number(/bytes: (\d+)/.exec(head)[1])), 0);
    units = null;
    if (typeof buffer.transfer === "function") buffer.transfer(0);
    return out;
  }

  async function init(m) {
    cfg = m;
    var t0 = performance.now();
    tokenizer = llmlabMakeTokenizer(m.tokenizer);
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
    decode15Into(m.text, 0, m.text.length, handedBytes[m.key], m.at / 8 * 15);
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
    }, function (file) { release(bytes[file]); bytes[file] = null; });   // each file freed once it is in the kernel
    release(bytes["decode.wasm"]);
    bytes["decode.wasm"] = null;
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
                      "in web/package.json; see LazyWeights in worker.js).");
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
