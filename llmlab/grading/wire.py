"""What crosses between `llmlab grade` and a submission's kernel: plain data, by the grader's rules.

The grader runs each check itself. When the check calls the learner's function, the inputs are
encoded here, sent to the kernel, and the learner's function runs there on decoded copies; what
it returns (or raises) comes back encoded the same way. The grader decodes into exact built-in
types: a tensor becomes a fresh `torch.Tensor` built from dtype, shape and raw bytes, a dict a
plain dict. Anything else (a Tensor subclass, an object with its own `__eq__`) becomes an
`Unsupported` stand-in that equals nothing, so a check fails on it with the type's name.

>>> decode(encode({"ids": [1, 2], "x": torch.tensor([0.5])}))
{'ids': [1, 2], 'x': tensor([0.5000])}

The kernel side (`serve`, which calls the functions that check() recorded in
llmlab.exercises.SUBMITTED) is code the learner could replace; that only changes the answers it
sends, never how the grader compares them.
"""
from __future__ import annotations

import base64
import inspect
import json
import os
import textwrap
import traceback
import types

import torch

DTYPES = {name: getattr(torch, name) for name in (
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "uint8", "int8", "int16", "int32", "int64", "bool")}
MAX_ELEMENTS = 50_000_000  # a bigger answer is refused (no exercise returns anything near this)
MAX_DEPTH = 20
MAX_TEXT = 2000


class WireError(ValueError):
    """The data that came back does not follow the rules."""


class Unsupported:
    """Stands for a returned value that is not plain data; equals nothing but itself."""
    type_name = "object"

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


def unsupported(type_name: str) -> Unsupported:
    name = "".join(c for c in str(type_name)[-200:] if c.isalnum() or c in "_.")[-60:].strip(".") or "object"
    cls = type(name.rsplit(".", 1)[-1] or "object", (Unsupported,), {"type_name": name})
    return cls()


# ---------------------------------------------------------------------------------------------- encode

def encode(value, depth: int = 0):
    """A JSON-ready description of `value`. Only exact plain types are described as themselves."""
    if depth > MAX_DEPTH:
        return {"t": "opaque", "type": "too deeply nested"}
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return {"t": kind.__name__ if value is not None else "none", "v": value}
    if kind is float:
        return {"t": "float", "v": repr(value)}  # repr keeps nan, inf and every bit of the value
    if kind is bytes:                             # raw file bytes, e.g. one GGUF block
        return {"t": "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return _encode_tensor(value)
    if kind in (list, tuple) or isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple -> tuple
        items = list.__iter__(value) if kind is list else tuple.__iter__(value)
        return {"t": "list" if kind is list else "tuple", "v": [encode(v, depth + 1) for v in items]}
    if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):  # Counter, OrderedDict
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return {**_encode_tensor(torch.from_numpy(value.copy())), "t": "ndarray"}
    if kind.__module__ == "numpy" and hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalar
        return {"t": "npscalar", "dtype": str(value.dtype), "v": encode(value.item(), depth + 1)}
    if isinstance(value, types.FunctionType):
        return _encode_function(value)
    if kind.__module__ == "llmlab.model" and kind.__name__ == "Transformer":
        return _encode_model(value, depth)
    if isinstance(value, types.ModuleType):
        return {"t": "module", "name": value.__name__}
    return {"t": "opaque", "type": f"{kind.__module__}.{kind.__qualname__}"}


def _encode_tensor(t: torch.Tensor) -> dict:
    t = torch.Tensor.detach(t)
    if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        return {"t": "opaque", "type": f"torch.Tensor ({t.layout}, {t.device.type})"}
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in DTYPES:
        return {"t": "opaque", "type": f"torch.Tensor of dtype {dtype}"}
    flat = t.cpu().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return {"t": "tensor", "dtype": dtype, "shape": list(t.shape), "data": base64.b64encode(raw).decode("ascii")}


def _encode_function(fn) -> dict:
    """A grader-side helper (a small closure of the check, e.g. a stand-in sublayer) as source code
    and the values it reads, so the kernel can rebuild it."""
    env = {}
    names = list(fn.__code__.co_freevars) + [n for n in fn.__code__.co_names if n in fn.__globals__]
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    for name in names:
        env[name] = encode(cells[name].cell_contents if name in cells else fn.__globals__[name])
    return {"t": "function", "name": fn.__name__, "def": fn.__code__.co_name,
            "source": textwrap.dedent(inspect.getsource(fn)), "env": env}


def _encode_model(model, depth: int) -> dict:
    """A small llmlab model that a check hands to the learner (e.g. causal tracing): its config and weights,
    so the kernel can rebuild the same model."""
    import dataclasses
    config = {f.name: getattr(model.config, f.name) for f in dataclasses.fields(model.config)}
    return {"t": "model", "config": encode(config, depth + 1), "attn_impl": model.attn_impl, "training": model.training,
            "state": encode(dict(model.state_dict()), depth + 1)}


def _decode_model(data: dict, depth: int):
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    model = Transformer(ModelConfig(**decode(data["config"], depth + 1, True)), attn_impl=str(data["attn_impl"]))
    model.load_state_dict(decode(data["state"], depth + 1, True))
    return model.train(bool(data["training"]))


# ---------------------------------------------------------------------------------------------- decode

def decode(data, depth: int = 0, functions: bool = False):
    """The value that `data` (from encode) describes, in exact built-in types. functions=True only
    on the kernel side, which rebuilds the grader's helper functions and models."""
    if depth > MAX_DEPTH or not isinstance(data, dict):
        raise WireError("malformed answer")
    kind = data.get("t")
    if kind == "none":
        return None
    if kind in ("bool", "int", "str"):
        value = data.get("v")
        if type(value) is not {"bool": bool, "int": int, "str": str}[kind]:
            raise WireError(f"malformed {kind}")
        return value
    if kind == "float":
        return float(str(data.get("v")))
    if kind == "bytes":
        try:
            return base64.b64decode(str(data.get("v")), validate=True)
        except ValueError:
            raise WireError("malformed bytes") from None
    if kind in ("tensor", "ndarray"):
        t = _decode_tensor(data)
        return t.numpy() if kind == "ndarray" and t.dtype != torch.bfloat16 else t
    if kind in ("list", "tuple"):
        items = [decode(v, depth + 1, functions) for v in _list(data.get("v"))]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        out = {}
        for pair in _list(data.get("v")):
            if not isinstance(pair, list) or len(pair) != 2:
                raise WireError("malformed dict")
            key = decode(pair[0], depth + 1, functions)
            try:
                out[key] = decode(pair[1], depth + 1, functions)
            except TypeError:  # an unhashable key
                raise WireError("a dict key that cannot be a key") from None
        return out
    if kind == "npscalar":
        import numpy as np
        return np.dtype(str(data.get("dtype"))).type(decode(data.get("v"), depth + 1))
    if kind == "opaque":
        return unsupported(data.get("type", "object"))
    if functions and kind == "module":
        import importlib
        return importlib.import_module(str(data["name"]))
    if functions and kind == "model":
        return _decode_model(data, depth)
    if functions and kind == "function":
        namespace = {name: decode(v, depth + 1, functions) for name, v in data["env"].items()}
        namespace["__builtins__"] = __builtins__
        exec(compile(data["source"], f"<llmlab helper {data['name']}>", "exec"), namespace)
        fn = namespace[data["def"]]
        fn.__name__ = data["name"]
        return fn
    raise WireError(f"unknown kind of value {str(kind)[:40]!r}")


def _list(value) -> list:
    if not isinstance(value, list):
        raise WireError("malformed list")
    return value


def _decode_tensor(data: dict) -> torch.Tensor:
    dtype = DTYPES.get(data.get("dtype"))
    shape = data.get("shape")
    if dtype is None or not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise WireError("malformed tensor")
    numel = 1
    for s in shape:
        numel *= s
    if numel > MAX_ELEMENTS:
        raise WireError(f"a tensor of {numel} elements is bigger than any answer can be")
    raw = base64.b64decode(str(data.get("data", "")), validate=True)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise WireError("tensor bytes do not match its shape and dtype")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()


# ---------------------------------------------------------------------------------------------- kernel side

def serve(request: str) -> str:
    """Run in the kernel by the grader: list the recorded exercises, or call one learner function.
    Returns a JSON string; learner errors come back as data too."""
    from llmlab import exercises  # check() put the learner's functions in exercises.SUBMITTED

    req = json.loads(request)
    if req.get("op") == "list":
        return json.dumps({"ok": sorted(exercises.SUBMITTED)})
    fn = exercises.SUBMITTED.get(req.get("exercise"))
    if fn is None:
        return json.dumps({"missing": True})
    args = [decode(a, functions=True) for a in req["args"]]
    try:
        value = fn(*args)
    except BaseException as e:  # KeyboardInterrupt (the grader's time limit) included
        return json.dumps({"raised": _describe_exception(e)})
    try:
        return json.dumps({"value": encode(value)})
    except Exception as e:
        return json.dumps({"value": {"t": "opaque", "type": f"{type(value).__qualname__} ({type(e).__name__})"}})


def _describe_exception(e: BaseException) -> dict:
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if "site-packages" not in f.filename and not f.filename.startswith(os.path.dirname(__file__))
              and "<llmlab helper" not in f.filename]
    line = ""
    if frames:
        f = frames[-1]
        line = f" (in {f.name}, line {f.lineno}" + (f": `{f.line.strip()}`)" if f.line else ")")
    try:
        message = str(e)[:MAX_TEXT]
    except Exception:
        message = "(the exception could not be shown)"
    return {"type": type(e).__name__, "message": message, "line": line[:MAX_TEXT],
            "not_implemented": isinstance(e, NotImplementedError),
            "interrupted": isinstance(e, KeyboardInterrupt)}

