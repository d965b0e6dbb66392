// Runs the live model's decode kernel in Node on the site's files, for tests/test_live_kernel.py and the benchmark.
//   node tests/live_kernel.js FOLDER WASM IDS N_NEW OUT [MODE [INTERVENTIONS]]
// FOLDER holds model.expand.json, model.data.*, model.norms (export_onnx(..., expanded=False)); IDS is
// comma-separated; the prompt goes in at once (MODE "prompt") or one token at a time (MODE "steps"), then
// N_NEW greedy steps. INTERVENTIONS: a float32 file, the head mask (L*H) then the steering rows (L*D). OUT gets the logits of every step (float32, (N_NEW + 1, V)); stdout gets JSON:
// {"ids": the greedy ids, "prompt_ms", "step_ms": [...], "memory_bytes"}.
"use strict";
const fs = require("fs");
const path = require("path");
const llmlabKernel = require(path.join(__dirname, "..", "assets", "live", "kernel.js"));

const [folder, wasmPath, idsText, nNewText, out, mode = "prompt", interventions] = process.argv.slice(2);
const recipe = JSON.parse(fs.readFileSync(path.join(folder, "model.expand.json"), "utf8"));
const files = {};
function read(name, start, length) {
  files[name] = files[name] || fs.readFileSync(path.join(folder, name));
  const data = files[name];
  return length === null ? data : data.subarray(start, start + length);
}
const kernel = llmlabKernel(fs.readFileSync(wasmPath), recipe, read);
if (interventions) {
  const { n_layers: L, n_heads: H } = recipe.kernel;
  const values = new Float32Array(new Uint8Array(fs.readFileSync(interventions)).buffer);
  kernel.interventions(values.subarray(0, L * H), values.subarray(L * H));
}
const prompt = idsText.split(",").map(Number);
const rows = [], stepMs = [];
let t0 = performance.now(), logits;
if (mode === "steps") prompt.forEach((id, p) => { logits = kernel.forward([id], p); });
else logits = kernel.forward(prompt, 0);
const promptMs = performance.now() - t0;
const ids = [];
for (let k = 0; ; k++) {
  rows.push(logits);
  let best = 0;
  for (let j = 1; j < logits.length; j++) if (logits[j] > logits[best]) best = j;
  ids.push(best);
  if (k === Number(nNewText)) break;
  t0 = performance.now();
  logits = kernel.forward([best], prompt.length + k);
  stepMs.push(performance.now() - t0);
}
const all = new Float32Array(rows.length * rows[0].length);
rows.forEach((r, k) => all.set(r, k * r.length));
fs.writeFileSync(out, Buffer.from(all.buffer));
console.log(JSON.stringify({ ids, prompt_ms: promptMs, step_ms: stepMs, memory_bytes: kernel.memoryBytes() }));
