"""Plain data across the sandbox boundary: a JSON header plus raw byte buffers, never pickle.

One message = 16-byte prefix (header length, buffer bytes) + UTF-8 JSON header + buffers.
Values are encoded as tagged JSON trees:

    None, bool, int, float, str    themselves (floats may be NaN/Infinity)
    {"t": "tensor", "dtype": "float32", "shape": [2, 3], "b": 0, "grad": false}
    {"t": "ndarray", "dtype": "<f8", "shape": [...], "b": 1}
    {"t": "list" | "tuple", "v": [...]}, {"t": "dict", "v": [[key, value], ...]}
    {"t": "bytes", "b": 2}, {"t": "complex"}, {"t": "size"}, {"t": "dtype"}, {"t": "slice"}, ...
    {"t": "ref", "id": 7, ...}     an object that is not data; it stays where it was made

Decoding checks every field (dtype from a fixed list, byte counts against shapes, sizes
against limits), so a hostile peer can send wrong answers but nothing else.
"""

import json
import math
import os
import select
import struct
import time

PREFIX = struct.Struct("<QQ")           # header bytes, buffer bytes
MAX_HEADER_BYTES = 16 * 2 ** 20
MAX_DEPTH = 32
MAX_ITEMS = 200_000                       # nodes per message
TENSOR_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool", "complex64", "complex128")
NUMPY_KINDS = "biufc"                     # bool, int, uint, float, complex (no objects)


class WireError(ValueError):
    """A message that breaks the format or a limit (from the other side, or unsendable)."""


class PeerGone(EOFError):
    """The other side closed the channel (it exited or was killed)."""


class WireTimeout(TimeoutError):
    """No complete message before the deadline."""


# --- encoding -----------------------------------------------------------------------------------
class Encoder:
    """Turns a value into (header tree, buffers); ``make_ref(obj)`` handles non-data objects."""

    def __init__(self, make_ref, max_bytes: int):
        self.make_ref, self.max_bytes = make_ref, max_bytes
        self.buffers, self.size, self.items = [], 0, 0
        self.tensors = []                  # tensors in encoding order (for write-back)

    def _buffer(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise WireError(f"value too large to send: more than {self.max_bytes // 2 ** 20} MB")
        self.buffers.append(data)
        return len(self.buffers) - 1

    def encode(self, x, depth: int = 0):
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise WireError(f"value too deeply nested or too many items (limits {MAX_DEPTH} "
                            f"levels, {MAX_ITEMS} items)")
        if x is None or type(x) in (bool, str):
            return x
        if type(x) is int:
            return x if abs(x) < 2 ** 63 else {"t": "bigint", "v": str(x)}
        if type(x) is float:
            return x
        if type(x) is complex:
            return {"t": "complex", "re": x.real, "im": x.imag}
        if type(x) in (bytes, bytearray):
            return {"t": "bytes", "b": self._buffer(bytes(x))}
        if x is Ellipsis:
            return {"t": "ellipsis"}
        if type(x) is slice:
            parts = (x.start, x.stop, x.step)
            return {"t": "slice", "v": [self.encode(p, depth + 1) for p in parts]}
        if type(x) is range:
            return {"t": "range", "v": [x.start, x.stop, x.step]}
        encoded = self._encode_array(x)
        if encoded is not None:
            return encoded
        if isinstance(x, tuple) and not _is_torch_size(x):
            return {"t": "tuple", "v": [self.encode(v, depth + 1) for v in tuple.__iter__(x)]}
        if isinstance(x, list):
            return {"t": "list", "v": [self.encode(v, depth + 1) for v in list.__iter__(x)]}
        if isinstance(x, dict):
            return {"t": "dict", "v": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                                       for k, v in dict.items(x)]}
        return self.make_ref(x)

    def _encode_array(self, x):
        """Tensors, arrays, numpy scalars, torch.Size and torch.dtype, else None."""
        module = type(x).__module__ or ""
        if module.startswith("torch"):
            import torch
            if isinstance(x, torch.Tensor):
                return self._encode_tensor(x)
            if isinstance(x, torch.Size):
                return {"t": "size", "v": [int(d) for d in tuple.__iter__(x)]}
            if isinstance(x, torch.dtype):
                name = str(x).removeprefix("torch.")
                return {"t": "dtype", "v": name} if name in TENSOR_DTYPES else None
        if module.startswith("numpy"):
            import numpy as np
            if isinstance(x, np.ndarray) and x.dtype.kind in NUMPY_KINDS and not x.dtype.fields:
                data = np.ascontiguousarray(x)
                return {"t": "ndarray", "dtype": data.dtype.str, "shape": list(data.shape),
                        "b": self._buffer(data.tobytes())}
            if isinstance(x, np.generic) and x.dtype.kind in NUMPY_KINDS:
                return self.encode(x.item())
        return None

    def _encode_tensor(self, x):
        import torch
        if x.layout != torch.strided or x.device.type != "cpu" or x.is_quantized:
            return self.make_ref(x)
        dtype = str(x.dtype).removeprefix("torch.")
        if dtype not in TENSOR_DTYPES:
            return self.make_ref(x)
        data = torch.Tensor.contiguous(torch.Tensor.detach(x))
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        self.tensors.append(x)
        return {"t": "tensor", "dtype": dtype, "shape": [int(d) for d in data.shape],
                "b": self._buffer(raw), "grad": bool(x.requires_grad)}


def _is_torch_size(x) -> bool:
    return type(x).__name__ == "Size" and (type(x).__module__ or "").startswith("torch")


# --- decoding -----------------------------------------------------------------------------------
class Decoder:
    """Rebuilds values from (header tree, buffers); ``resolve_ref(node)`` handles refs."""

    def __init__(self, buffers, resolve_ref):
        self.buffers, self.resolve_ref = buffers, resolve_ref
        self.items = 0
        self.tensors = []                  # decoded tensors in order (for write-back)

    def _bytes(self, index) -> bytes:
        if type(index) is not int or not 0 <= index < len(self.buffers):
            raise WireError(f"bad buffer index {index!r}")
        return self.buffers[index]

    def decode(self, node, depth: int = 0):
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise WireError("value too deeply nested or too many items")
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is not dict or type(node.get("t")) is not str:
            raise WireError(f"malformed value of type {type(node).__name__}")
        tag = node["t"]
        if tag in ("list", "tuple"):
            items = [self.decode(v, depth + 1) for v in _list(node.get("v"))]
            return items if tag == "list" else tuple(items)
        if tag == "dict":
            out = {}
            for pair in _list(node.get("v")):
                if type(pair) is not list or len(pair) != 2:
                    raise WireError("malformed dict entry")
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError:
                    raise WireError("unhashable dict key") from None
            return out
        if tag == "tensor":
            return self._tensor(node)
        if tag == "ndarray":
            return self._ndarray(node)
        if tag == "ref":
            return self.resolve_ref(node)
        return self._scalar(tag, node, depth)

    def _scalar(self, tag, node, depth):
        if tag == "bigint":
            return int(_str(node.get("v")))
        if tag == "complex":
            return complex(_float(node.get("re")), _float(node.get("im")))
        if tag == "bytes":
            return self._bytes(node.get("b"))
        if tag == "ellipsis":
            return Ellipsis
        if tag == "slice":
            parts = _list(node.get("v"))
            if len(parts) != 3:
                raise WireError("malformed slice")
            return slice(*(self.decode(p, depth + 1) for p in parts))
        if tag == "range":
            parts = _list(node.get("v"))
            if len(parts) != 3 or any(type(p) is not int for p in parts):
                raise WireError("malformed range")
            return range(*parts)
        if tag == "size":
            import torch
            return torch.Size([_nonneg_int(d) for d in _list(node.get("v"))])
        if tag == "dtype":
            import torch
            return getattr(torch, _dtype_name(node.get("v")))
        raise WireError(f"unknown value tag {tag!r}")

    def _tensor(self, node):
        import torch
        dtype = getattr(torch, _dtype_name(node.get("dtype")))
        shape = [_nonneg_int(d) for d in _list(node.get("shape"))]
        raw = self._bytes(node.get("b"))
        itemsize = torch.empty((), dtype=dtype).element_size()
        if len(raw) != math.prod(shape) * itemsize:
            raise WireError(f"tensor of shape {shape} and dtype {dtype} needs "
                            f"{math.prod(shape) * itemsize} bytes, got {len(raw)}")
        if raw:
            flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
            tensor = flat.view(dtype).reshape(shape)
        else:
            tensor = torch.empty(shape, dtype=dtype)
        if node.get("grad") is True and tensor.is_floating_point():
            tensor.requires_grad_(True)
        self.tensors.append(tensor)
        return tensor

    def _ndarray(self, node):
        import numpy as np
        try:
            dtype = np.dtype(_str(node.get("dtype")))
        except TypeError:
            raise WireError(f"bad array dtype {node.get('dtype')!r}") from None
        if dtype.kind not in NUMPY_KINDS or dtype.fields or dtype.subdtype:
            raise WireError(f"array dtype {dtype} is not plain numbers")
        shape = [_nonneg_int(d) for d in _list(node.get("shape"))]
        raw = self._bytes(node.get("b"))
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise WireError(f"array of shape {shape} needs {math.prod(shape) * dtype.itemsize} "
                            f"bytes, got {len(raw)}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _list(value) -> list:
    if type(value) is not list:
        raise WireError("malformed message: expected a list")
    return value


def _str(value) -> str:
    if type(value) is not str or len(value) > 10_000:
        raise WireError("malformed message: expected a short string")
    return value


def _float(value) -> float:
    if type(value) not in (int, float):
        raise WireError("malformed message: expected a number")
    return float(value)


def _nonneg_int(value) -> int:
    if type(value) is not int or not 0 <= value < 2 ** 40:
        raise WireError(f"bad dimension {value!r}")
    return value


def _dtype_name(value) -> str:
    if value not in TENSOR_DTYPES:
        raise WireError(f"unsupported tensor dtype {value!r}")
    return value


# --- framing ------------------------------------------------------------------------------------
def pack(header: dict, buffers=()) -> bytes:
    """One message as bytes."""
    header = dict(header, buffers=[len(b) for b in buffers])
    text = json.dumps(header, allow_nan=True, separators=(",", ":")).encode()
    return PREFIX.pack(len(text), sum(len(b) for b in buffers)) + text + b"".join(buffers)


def write_message(fd: int, header: dict, buffers=(), deadline: float = None) -> None:
    """Write one message to ``fd`` (blocking, or until ``deadline`` if the fd is non-blocking)."""
    view = memoryview(pack(header, buffers))
    while view:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WireTimeout("the other side stopped reading")
            select.select([], [fd], [], remaining)
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise PeerGone("the other side closed the channel") from None
        view = view[written:]


class MessageReader:
    """Reads whole messages from a pipe, enforcing a deadline and a size limit."""

    def __init__(self, fd: int, max_bytes: int):
        self.fd, self.max_bytes, self.pending = fd, max_bytes, bytearray()

    def _fill(self, count: int, deadline) -> None:
        while len(self.pending) < count:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WireTimeout("no answer before the deadline")
                ready, _, _ = select.select([self.fd], [], [], remaining)
                if not ready:
                    continue
            chunk = os.read(self.fd, min(2 ** 20, max(count - len(self.pending), 65536)))
            if not chunk:
                raise PeerGone("the other side closed the channel")
            self.pending += chunk

    def _take(self, count: int) -> bytes:
        data = bytes(self.pending[:count])
        del self.pending[:count]
        return data

    def read(self, deadline: float = None):
        """(header dict, list of buffers); raises WireTimeout, PeerGone or WireError."""
        self._fill(PREFIX.size, deadline)
        header_len, body_len = PREFIX.unpack(self._take(PREFIX.size))
        if header_len > MAX_HEADER_BYTES or body_len > self.max_bytes:
            raise WireError(f"message too large ({header_len + body_len} bytes; the limit is "
                            f"{self.max_bytes // 2 ** 20} MB)")
        self._fill(header_len + body_len, deadline)
        try:
            header = json.loads(self._take(header_len).decode("utf-8"))
        except (ValueError, RecursionError) as error:
            raise WireError(f"malformed message header ({type(error).__name__})") from None
        if type(header) is not dict:
            raise WireError("malformed message header")
        sizes = header.pop("buffers", None)
        if (type(sizes) is not list or any(type(s) is not int or s < 0 for s in sizes)
                or sum(sizes) != body_len):
            raise WireError("buffer sizes do not match the message length")
        body, buffers, start = self._take(body_len), [], 0
        for size in sizes:
            buffers.append(body[start:start + size])
            start += size
        return header, buffers
