"""The grader's side of a running submission: requests to its kernel, and a Learner that lives there.

Every call of the learner's function becomes one request: the inputs go to the kernel as plain data
(wire.encode), the function runs there, and the answer comes back as plain data (wire.decode) for
the check to compare here. Each request has its own nonce and time limit; a call past its limit is
interrupted, and a kernel that ignores the interrupt is given up.
"""
from __future__ import annotations

import ast
import json
import secrets
import time

from llmlab.exercises.registry import BY_ID
from llmlab.exercises.core import Learner
from llmlab.exercises.results import _TimeUp
from llmlab.grading import wire

INTERRUPT_GRACE = 5.0                 # seconds a kernel gets to come back after an interrupt


class KernelGone(BaseException):
    """The kernel stopped answering (a call ignored the interrupt). A BaseException, so that no
    check turns it into feedback on the learner's code: the exercise gets an error row."""


class BadAnswer(BaseException):
    """What came back from the kernel is not an answer in the grader's format (error row)."""


class Kernel:
    """Requests to the running kernel of one submission, each with its own nonce and time limit."""

    def __init__(self, client):
        self.client = client
        self.gone = ""

    def request(self, payload: dict, limit: float) -> dict:
        from jupyter_core.utils import run_sync

        if self.gone:
            raise KernelGone(self.gone)
        nonce = secrets.token_hex(8)
        expr = f"__import__('llmlab.grading.wire', fromlist=['serve']).serve({json.dumps(json.dumps(payload))})"
        kc = self.client.kc
        msg_id = kc.execute("", silent=True, store_history=False, user_expressions={nonce: expr})
        deadline = time.monotonic() + limit
        reply = self._reply(run_sync, kc, msg_id, deadline)
        if reply is None:  # time is up: interrupt (SIGINT), and give up on the kernel if it does not come back
            run_sync(self.client.km.interrupt_kernel)()
            reply = self._reply(run_sync, kc, msg_id, time.monotonic() + INTERRUPT_GRACE)
            if reply is None:
                self.gone = "the kernel stopped answering after a call ran past its time limit and ignored the interrupt"
            raise _TimeUp()
        result = reply["content"].get("user_expressions", {}).get(nonce, {})
        if result.get("status") != "ok":
            if result.get("ename") == "KeyboardInterrupt":
                raise _TimeUp()
            raise BadAnswer(f"the grader's request failed in the kernel ({str(result.get('ename'))[:60]})")
        text = result.get("data", {}).get("text/plain", "")
        try:
            answer = json.loads(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise BadAnswer("the kernel's answer is not in the grader's format") from None
        if not isinstance(answer, dict):
            raise BadAnswer("the kernel's answer is not in the grader's format")
        return answer

    @staticmethod
    def _reply(run_sync, kc, msg_id, deadline):
        import queue
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = run_sync(kc.get_shell_msg)(timeout=left)
            except (queue.Empty, TimeoutError):
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg


class RemoteLearner(Learner):
    """A Learner whose function lives in the submission's kernel: inputs go there as plain data,
    the answer comes back as plain data, and the check runs here."""

    def __init__(self, kernel: Kernel, exercise: str, time_limit: float):
        super().__init__(None, BY_ID[exercise].signature.split("(")[0], time_limit)
        self.kernel, self.exercise = kernel, exercise

    def invoke(self, args: tuple):
        answer = self.kernel.request({"op": "call", "exercise": self.exercise,
                                      "args": [wire.encode(a) for a in args]}, self.time_limit)
        if answer.get("missing"):
            raise BadAnswer("no function was handed to the grader for this exercise")
        if "raised" in answer:
            raised = answer["raised"] if isinstance(answer["raised"], dict) else {}
            if raised.get("interrupted"):
                raise _TimeUp()
            if raised.get("not_implemented"):
                raise NotImplementedError()
            raise _rebuilt_exception(raised)
        if "value" not in answer:
            raise BadAnswer("the kernel's answer holds no value (only the grader decides a status)")
        try:
            return wire.decode(answer["value"])
        except (wire.WireError, ValueError, TypeError, RecursionError) as e:
            raise BadAnswer(f"the kernel's answer is not in the grader's format ({e})") from None


def _rebuilt_exception(raised: dict) -> Exception:
    """The learner's exception as the grader shows it: same type name, message and line."""
    import builtins
    name = "".join(c for c in str(raised.get("type", "Exception"))[:60] if c.isalnum() or c == "_") or "Exception"
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or cls in (NotImplementedError,):
        cls = type(name, (Exception,), {})
    try:
        e = cls(str(raised.get("message", ""))[:wire.MAX_TEXT])
    except Exception:
        e = type(name, (Exception,), {})(str(raised.get("message", ""))[:wire.MAX_TEXT])
    e.learner_line = str(raised.get("line", ""))[:wire.MAX_TEXT]
    return e
