"""The string literals of a JavaScript file, and which of them are the text passed to the views' lookup
L.t(...) (see llmlab/visualization/assets/common.js). A small tokenizer, enough for the views' own code:
strings in '...' and "...", // and /* */ comments, and regex literals (a / where a value cannot end)."""
import json
import re

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0", "/": "/"}


def _decode(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif n == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        else:
            out.append(ESCAPES.get(n, n))
            i += 2
    return "".join(out)


def tokens(source: str):
    """[(kind, text, offset)] with kind 'str' (text decoded), 'name', 'punct'; comments and regexes dropped."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if c.isspace():
            i += 1
        elif source.startswith("//", i):
            i = source.find("\n", i) if "\n" in source[i:] else n
        elif source.startswith("/*", i):
            i = source.index("*/", i) + 2
        elif c in "'\"`":
            j = i + 1
            while source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append(("str", _decode(source[i + 1:j]), i))
            i = j + 1
        elif c == "/":
            prev = out[-1] if out else ("punct", "(", 0)
            if prev[0] == "punct" and prev[1] in "(,=:[!&|?{};+" or prev[1] == "return":
                j, in_class = i + 1, False                    # a regex literal: skip it
                while in_class or source[j] != "/":
                    if source[j] == "\\":
                        j += 1
                    elif source[j] == "[":
                        in_class = True
                    elif source[j] == "]":
                        in_class = False
                    j += 1
                i = j + 1
                while i < n and source[i].isalpha():
                    i += 1
            else:
                out.append(("punct", c, i))
                i += 1
        elif c.isalnum() or c in "_$":
            m = re.match(r"[\w$]+", source[i:])
            out.append(("name", m.group(), i))
            i += len(m.group())
        else:
            out.append(("punct", c, i))
            i += 1
    return out


def lookups(source: str):
    """{text: offset} of every L.t('...' + '...') call's text, and the set of offsets of the literals they use."""
    toks, keys, used = tokens(source), {}, set()
    for k in range(len(toks) - 3):
        if toks[k][1] == "t" and toks[k - 1][1] == "." and toks[k + 1][1] == "(" and toks[k + 2][0] == "str":
            parts, m = [toks[k + 2]], k + 3
            while toks[m][1] == "+" and toks[m + 1][0] == "str":
                parts.append(toks[m + 1])
                m += 2
            keys["".join(p[1] for p in parts)] = parts[0][2]
            used.update(p[2] for p in parts)
    return keys, used


def table(source: str) -> dict:
    """The object literal `window.llmlab.ZH = {...}` of zh.js, as a dict (keys and values are plain strings)."""
    toks = tokens(source)
    start = next(k for k in range(len(toks)) if toks[k][1] == "ZH" and toks[k + 1][1] == "=")
    entries, k = {}, start + 3
    while toks[k][1] != "}":
        key, k = toks[k][1], k + 2                               # 'key' :
        value = toks[k][1]
        k += 1
        while toks[k][1] == "+":
            value += toks[k + 1][1]
            k += 2
        assert key not in entries, f"{json.dumps(key)} is in the table twice"
        entries[key] = value
        if toks[k][1] == ",":
            k += 1
    return entries
