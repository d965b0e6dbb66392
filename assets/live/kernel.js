/* The live model's decode kernel (llmlab/live/decode.c, built to decode.wasm): the page side.
 *
 * The kernel runs SmolLM2's forward pass on the GGUF file's own Q4_1 / Q8_0 blocks in WebAssembly
 * memory. This file copies the blocks in once (about 100 MB, never expanded to float32), tells the
 * kernel where each one is, and gives the worker three calls:
 *
 *   var k = llmlabKernel(wasmBytes, recipe, read, done)
 *        // recipe: model.expand.json; read(file, 0, null) -> the file's bytes; done(file) (optional): the file
 *        // is copied in, the caller may free its copy (the page never holds the blocks twice over)
 *   k.forward([504, 3458, 314], 0)                  // a prompt at positions 0..2: the last token's logits (V,)
 *   k.forward([253], 3)                             // one more token after the 3 cached ones
 *   k.interventions(headMask, steer)                // (L*H,) 1 keeps a head, 0 knocks it out; (L*D,) added after each block
 *   k.blocks(w)                                     // a recipe weight's blocks, where the kernel keeps them
 *
 * A classic script (no modules): it loads in the page, in Node, and (as String(llmlabKernelModule), the
 * way the page builds its worker from a Blob) in the Web Worker.
 */
function llmlabKernelModule() {
  "use strict";
  var LAYER_FIELDS = ["attn_norm", "ffn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                      "ffn_gate", "ffn_up", "ffn_down"];      // the order of decode.c's struct layer
  var MODEL_INTS = 8, LAYERS_AT = 17;                         // struct model: 8 sizes, eps, 8 pointers, then the layers
  var MAX_T = 256;                                            // decode.c: the most tokens in one call

  return function create(wasmBytes, recipe, read, done) {
    var spec = recipe.kernel;
    if (!spec) throw new Error("model.expand.json has no 'kernel' entry: rebuild the live files (make live).");
    var instance = new WebAssembly.Instance(new WebAssembly.Module(wasmBytes), {});
    var wasm = instance.exports;
    var L = spec.n_layers, D = spec.d_model, H = spec.n_heads;

    function copyIn(bytes, at) { new Uint8Array(wasm.memory.buffer, at, bytes.length).set(bytes); }
    function alloc(bytes) {
      var at = wasm.alloc(bytes);
      if (!at) throw new Error("The decode kernel could not get " + bytes + " bytes of memory.");
      return at;
    }
    function floats(values) {                                 // a Float32Array copied into the kernel's memory
      var at = alloc(4 * values.length);
      new Float32Array(wasm.memory.buffer, at, values.length).set(values);
      return at;
    }

    // struct model: sizes and eps, then pointers (wasm32: 4 bytes each), then L layers of 9 pointers
    var slots = wasm.model() / 4;
    var i32 = function () { return new Int32Array(wasm.memory.buffer); };
    [L, D, H, spec.n_kv_heads, spec.head_dim, spec.d_ff, spec.vocab, spec.context].forEach(function (v, j) {
      i32()[slots + j] = v;
    });
    new Float32Array(wasm.memory.buffer)[slots + MODEL_INTS] = spec.eps;

    // The norms and RoPE tables: one float32 file, attn_norm and ffn_norm of each block, output_norm, cos, sin.
    var norms = read(spec.file, 0, null);
    var normsAt = alloc(norms.length);
    copyIn(norms, normsAt);
    if (done) done(spec.file);
    var half = spec.head_dim / 2, table = spec.context * half;
    var layer = function (l, field) { return slots + LAYERS_AT + 9 * l + LAYER_FIELDS.indexOf(field); };
    for (var l = 0; l < L; l++) {
      i32()[layer(l, "attn_norm")] = normsAt + 4 * (2 * l) * D;
      i32()[layer(l, "ffn_norm")] = normsAt + 4 * (2 * l + 1) * D;
    }
    var outNorm = normsAt + 4 * 2 * L * D;
    i32()[slots + 10] = outNorm;
    i32()[slots + 11] = outNorm + 4 * D;                      // cos (context, hd/2)
    i32()[slots + 12] = outNorm + 4 * (D + table);            // sin

    // The blocks: each data file copied in whole, once (its weights lie one after another in it, the
    // embedding's slices in order, one table of V rows); done(file) lets the caller free its copy at once.
    var fileAt = {};
    recipe.weights.forEach(function (w) {
      if (fileAt[w.file] !== undefined) return;
      var bytes = read(w.file, 0, null);
      fileAt[w.file] = alloc(bytes.length);
      copyIn(bytes, fileAt[w.file]);
      bytes = null;
      if (done) done(w.file);
    });
    var where = {}, embeddingEnd = null;                      // recipe weight name -> its blocks' address
    recipe.weights.forEach(function (w) {
      var at = where[w.name] = fileAt[w.file] + w.start;
      if (w.tensor === "token_embd.weight") {
        if (embeddingEnd === null) i32()[slots + 9] = at;
        else if (at !== embeddingEnd) throw new Error("The embedding's slices are not one table in model.data: rebuild the live files (make live).");
        embeddingEnd = at + w.length;
        return;
      }
      var m = /^blk\.(\d+)\.(\w+)\.weight$/.exec(w.tensor);
      if (!m || LAYER_FIELDS.indexOf(m[2]) < 2) throw new Error("The decode kernel does not know the weight " + w.tensor + ".");
      i32()[layer(+m[1], m[2])] = at;
    });

    // Interventions (none until set) and the working buffers.
    var maskAt = floats(new Float32Array(L * H).fill(1)), steerAt = floats(new Float32Array(L * D));
    i32()[slots + 13] = maskAt;
    i32()[slots + 14] = steerAt;
    if (!wasm.setup()) throw new Error("The decode kernel could not set up its buffers for this model.");
    var idsAt = alloc(4 * MAX_T);

    return {
      maxTokens: MAX_T,
      context: spec.context,
      /** ids at positions pos, pos+1, ...: fills the cache there; returns the last one's logits (a copy). */
      forward: function (ids, pos) {
        if (ids.length < 1 || ids.length > MAX_T || pos < 0 || pos + ids.length > spec.context) {
          throw new RangeError("The decode kernel takes 1 to " + MAX_T + " tokens at once within " + spec.context +
                               " positions; got " + ids.length + " at position " + pos + ".");
        }
        new Int32Array(wasm.memory.buffer, idsAt, ids.length).set(ids);
        var at = wasm.forward(idsAt, ids.length, pos);
        return new Float32Array(wasm.memory.buffer, at, spec.vocab).slice();
      },
      /** headMask (L*H) or null: all heads kept; steer (L*D) or null: nothing added. */
      interventions: function (headMask, steer) {
        new Float32Array(wasm.memory.buffer, maskAt, L * H).set(headMask || new Float32Array(L * H).fill(1));
        new Float32Array(wasm.memory.buffer, steerAt, L * D).set(steer || new Float32Array(L * D));
      },
      /** The blocks of one weight of the recipe, read where the kernel keeps them (no copy). */
      blocks: function (w) { return new Uint8Array(wasm.memory.buffer, where[w.name], w.length); },
      memoryBytes: function () { return wasm.memory.buffer.byteLength; }
    };
  };
}
var llmlabKernel = llmlabKernelModule();
if (typeof module !== "undefined") module.exports = llmlabKernel;
