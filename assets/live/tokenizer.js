/* The live model's tokenizer, on the page (the tokens view needs nothing else) and in the Web Worker
 * (the page puts String(llmlabMakeTokenizer) into the worker's source).
 *
 * A port of llmlab's ByteLevelBPE: split on special tokens, pre-split with the regex patterns,
 * UTF-8 bytes -> one token per byte -> merges, lowest rank first (leftmost on ties). The display
 * form of a token is llmlab.visualization.show_token's: "␣" for a space, "<e5>" for a byte that is
 * not a whole character, "⟨im_start⟩" for a special token. */
function llmlabMakeTokenizer(spec) {
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
