"""Row-exact batched forwards: a batch's row ``i`` gets the very bits a batch of one gives.

Matrix products on a CPU pick their kernel by the batch size (MKL's one-row path sums in
another order than its many-row path), so a batched policy forward may differ from the
single-episode forward in the last bits, and a near tie in the logits then flips the argmax.
oneDNN's convolutions choose their algorithm by the batch size too (measured: a 64-channel 3×3
convolution of the CMA encoder). Inside :func:`row_exact` the matrix products of 2-D inputs
(``linear``, ``addmm``, ``mm``, ``matmul``), the recurrent cells (``gru_cell``, ``lstm_cell``,
``rnn_*_cell``) and the convolutions run one sample at a time, with the shapes of a batch of one;
everything else (element-wise operations, pooling, batched ``bmm``, attention) runs on the whole
batch, whose rows do not depend on each other. What a batched forward saves is then the
per-call overhead of the many small operations, not arithmetic; batched evaluation's speed
comes mostly from its environments rendering in parallel.
``tests/learn/test_batched_acting.py`` checks the equality bit for bit.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: operations whose first (``addmm``: second) operand is split into rows; cells also split their state
_PRODUCTS = {"linear", "mm", "matmul", "__matmul__"}
_CELLS = {"gru_cell", "rnn_tanh_cell", "rnn_relu_cell"}
#: operations whose batched input (N, C, ...) is split into samples
_CONVOLUTIONS = {"conv1d", "conv2d", "conv3d"}


def _rows(x: Any) -> int:
    return int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[0] > 1 else 0


class _RowExact(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _PRODUCTS and _rows(args[0]) and (name == "linear" or _is_matrix(args[1])):
            rest = args[1:]
            return torch.cat([func(args[0][i:i + 1], *rest, **kwargs) for i in range(args[0].shape[0])])
        if name == "addmm" and _rows(args[1]):
            bias, mat1 = args[0], args[1]
            split = isinstance(bias, torch.Tensor) and bias.dim() == 2 and bias.shape[0] == mat1.shape[0]
            return torch.cat([func(bias[i:i + 1] if split else bias, mat1[i:i + 1], *args[2:], **kwargs)
                              for i in range(mat1.shape[0])])
        if name in _CONVOLUTIONS and isinstance(args[0], torch.Tensor) and args[0].dim() >= 3 and args[0].shape[0] > 1:
            return torch.cat([func(args[0][i:i + 1], *args[1:], **kwargs) for i in range(args[0].shape[0])])
        if name in _CELLS and _rows(args[0]):
            return torch.cat([func(args[0][i:i + 1], args[1][i:i + 1], *args[2:], **kwargs)
                              for i in range(args[0].shape[0])])
        if name == "lstm_cell" and _rows(args[0]):
            hx, cx = args[1]
            outs = [func(args[0][i:i + 1], (hx[i:i + 1], cx[i:i + 1]), *args[2:], **kwargs)
                    for i in range(args[0].shape[0])]
            return tuple(torch.cat(part) for part in zip(*outs))
        return func(*args, **kwargs)


def _is_matrix(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dim() == 2


def row_exact() -> TorchFunctionMode:
    """Context manager: batched forwards inside it give each row the result of a batch of one."""
    return _RowExact()
