"""The tokenization views: how tokenizers cut a text, and byte-pair-encoding merges step by step."""
from __future__ import annotations

from llmlab.visualization.display import show_token, text_of_shown
from llmlab.visualization.html import View, escape, live_data


class TokensView(View):
    """Coloured tokenizer view: one row per tokenization, tokens alternate colours, ids on hover.

    rows: {"name": [(text, id), ...]} or a list of (text, id) pairs for a single row; a third item,
    the token's bytes, makes byte fragments exact ("<e5><a4>" instead of "�").
    `TokensView.from_tokenizers(text, {"SmolLM2": tok1, "Gemma 3": tok2})` encodes for you.
    live: in the built book, a text box that shows SmolLM2's tokens of the reader's own text (default on).
    """

    kind = "tokens"
    palette = ("#fde2a7", "#b9e3c6", "#f7c6d0", "#c6dbf7", "#e3d1f7", "#f7dcc6")

    def __init__(self, rows, title=None, live: bool = True, text: str | None = None):
        if not isinstance(rows, dict):
            rows = {"tokens": rows}
        data_rows = []
        for name, pairs in rows.items():
            tokens = []
            for pair in pairs:
                piece, token_id = pair[0], int(pair[1])          # `piece`, not `text`: that is the argument
                raw = pair[2] if len(pair) > 2 else None
                special = pair[3] if len(pair) > 3 else None
                shown = show_token(bytes(raw) if raw is not None and not looks_like_text(piece, raw) else piece,
                                   special=special)
                tokens.append({"text": shown, "id": token_id,
                               "bytes": None if raw is None else " ".join(f"{b:02x}" for b in raw)})
            data_rows.append({"name": str(name), "tokens": tokens})
        if text is None:
            text = text_of_shown([t["text"] for t in data_rows[0]["tokens"]]) if data_rows else ""
        super().__init__({"rows": data_rows, **live_data(live, text)}, title)

    @classmethod
    def from_tokenizers(cls, text: str, tokenizers: dict, title=None, live: bool = True) -> "TokensView":
        """Encode `text` with each tokenizer and show each token as the book shows tokens."""
        rows = {}
        for name, tok in tokenizers.items():
            ids = tok.encode(text, add_special_tokens=False)
            raw = getattr(tok, "token_bytes", None)  # the bytes behind each token, when the tokenizer says
            specials = set(getattr(tok, "special_tokens", {}).values())
            rows[name] = [(tok.decode([i]), i) + ((raw[i], i in specials or None) if raw is not None else ())
                          for i in ids]
        return cls(rows, title=title, live=live, text=text)

    def static_html(self) -> str:
        parts = []
        for row in self.data["rows"]:
            spans = "".join(
                f'<span class="llmlab-tok" style="background:{self.palette[k % len(self.palette)]}" '
                f'title="id {t["id"]}">{escape(t["text"])}</span>' for k, t in enumerate(row["tokens"]))
            parts.append(f'<div class="llmlab-title">{escape(row["name"])} — {len(row["tokens"])} tokens</div>'
                         f"<div>{spans}</div>")
        return "".join(parts)


def looks_like_text(text: str, raw) -> bool:
    """True when a decoded token string already says everything its bytes say (no "�" from a fragment)."""
    return "\ufffd" not in text or b"\xef\xbf\xbd" in bytes(raw)


class BPEMergeView(View):
    """Step through byte-pair-encoding merges: each step merges the most frequent adjacent pair.

    steps[0] = {"tokens": [...single symbols...]}, steps[i] = {"tokens", "pair", "merged", "count"}.
    `BPEMergeView.from_text("low lower lowest", 6)` runs the merges itself (on characters).
    """

    kind = "bpe"

    def __init__(self, steps, title=None):
        if not steps or "tokens" not in steps[0]:
            raise ValueError("steps must be a non-empty list of dicts, each with a 'tokens' list.")
        clean = [{"tokens": [show_token(t) for t in s["tokens"]],
                  "pair": None if s.get("pair") is None else [show_token(p) for p in s["pair"]],
                  "merged": None if s.get("merged") is None else show_token(s["merged"]),
                  "count": s.get("count")} for s in steps]
        super().__init__({"steps": clean}, title)

    @classmethod
    def from_text(cls, text: str, num_merges: int, title=None) -> "BPEMergeView":
        """Greedy BPE on the characters of `text`: 'aaab' -> merge ('a','a') -> ['aa', 'a', 'b'] -> ..."""
        from llmlab.tokenization.bpe import count_and_pick, get_pair_counts, merge

        vocab = sorted(set(text))
        strings = {i: s for i, s in enumerate(vocab)}      # id -> the text it stands for
        ids = [vocab.index(ch) for ch in text]
        steps = [{"tokens": [strings[i] for i in ids]}]
        for _ in range(num_merges):
            counts = get_pair_counts(ids)
            if not counts or max(counts.values()) < 2:
                break
            pair = count_and_pick(counts)  # most frequent; ties -> smallest pair, as the trainer does
            new_id = len(strings)
            strings[new_id] = strings[pair[0]] + strings[pair[1]]
            ids = merge(ids, pair, new_id)
            steps.append({"tokens": [strings[i] for i in ids], "pair": [strings[pair[0]], strings[pair[1]]],
                          "merged": strings[new_id], "count": counts[pair]})
        return cls(steps, title=title)

    def static_html(self) -> str:
        last = self.data["steps"][-1]
        spans = "".join(f'<span class="llmlab-tok" style="background:#eee">{escape(t)}</span>' for t in last["tokens"])
        return f'<div class="llmlab-readout">after {len(self.data["steps"]) - 1} merges:</div><div>{spans}</div>'
