"""torch's GRU and LSTM a faster way on a CPU, for model.py behind one switch (applies): a step through torch's
cell; a packed sequence as one input projection, then one time step at a time. Other cores never come here."""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

State = tuple[torch.Tensor, ...]  # (h,) or (h, c), each (B, H)


def _gru_gates(gx: torch.Tensor, gh: torch.Tensor, state: State) -> State:
    """torch's GRU step from gx = W_ih x + b_ih and gh = W_hh h + b_hh (B, 3H); gates (reset, update, new)."""
    xr, xz, xn = gx.chunk(3, dim=1)  # (B, 3H) -> 3 x (B, H)
    hr, hz, hn = gh.chunk(3, dim=1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return ((1 - z) * n + z * state[0],)


def _lstm_gates(gx: torch.Tensor, gh: torch.Tensor, state: State) -> State:
    """torch's LSTM step from its two projections (B, 4H); gates (input, forget, cell, output)."""
    i, f, g, o = (gx + gh).chunk(4, dim=1)  # (B, 4H) -> 4 x (B, H)
    c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class _Core(NamedTuple):
    cell: Callable  # torch's one-step function on the layer's weights
    gates: Callable  # the same step from the two projections


TABLE = {nn.GRU: _Core(torch.gru_cell, _gru_gates), nn.LSTM: _Core(torch.lstm_cell, _lstm_gates)}


def applies(cores: list[nn.Module], x: torch.Tensor | PackedSequence) -> bool:
    """Whether run() takes x through these cores: torch's own GRU or LSTM, on a CPU, a step or a packed sequence."""
    step = isinstance(x, torch.Tensor) and x.shape[1] == 1
    return (x.data.device.type == "cpu" and (step or isinstance(x, PackedSequence))
            and all(type(core) in TABLE and core.bias and not core.proj_size for core in cores))


# Under bfloat16, oneDNN builds a kernel for every new row count of a matrix product; rounding the rows up to
# a multiple of ROWS (the extra rows' results are dropped) keeps the counts few while the minibatches vary.
ROWS = 16


def _round_up(n: int) -> int:
    return -(-n // ROWS) * ROWS


def run(core: nn.RNNBase, x: torch.Tensor | PackedSequence, h: torch.Tensor | State):
    """core(x, h) for a core that applies(): x (B, 1, F) or packed (R, F), h (layers, B, H) or a tuple of them."""
    table, weights = TABLE[type(core)], core.all_weights
    parts = h if isinstance(h, tuple) else (h,)
    if isinstance(x, torch.Tensor):  # a step: (B, 1, F) -> (B, F), one cell per layer
        y, new = x[:, 0], []
        for k, layer in enumerate(weights):
            state = table.cell(y, tuple(p[k] for p in parts) if len(parts) > 1 else parts[0][k], *layer)
            state = state if isinstance(state, tuple) else (state,)
            y = state[0]
            new.append(state)
        out = tuple(torch.stack(s) for s in zip(*new))  # layers x parts x (B, H) -> parts x (layers, B, H)
        return y[:, None], out if isinstance(h, tuple) else out[0]
    y, sizes = x.data, x.batch_sizes.tolist()
    if x.sorted_indices is not None:  # the sequences longest first, as the packed rows are
        parts = tuple(p.index_select(1, x.sorted_indices) for p in parts)
    finals = []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        R, N = y.shape[0], sizes[0]
        gx = F.linear(F.pad(y, (0, 0, 0, _round_up(R) - R)), w_ih, b_ih)[:R].float()  # (R, G*H), G gates
        gx = F.pad(gx, (0, 0, 0, N))  # rows for rounded-up steps; their results are dropped
        state, outputs, start = tuple(p[k] for p in parts), [], 0
        for b in sizes:  # the first b sequences, longest first, have a step here
            rows = min(_round_up(b), N)
            new = table.gates(gx[start:start + rows], F.linear(state[0][:rows], w_hh, b_hh).float(),
                              tuple(s[:rows] for s in state))
            state = tuple(torch.cat((n[:b], s[b:])) for n, s in zip(new, state))  # ended sequences keep theirs
            outputs.append(state[0][:b])
            start += b
        y = torch.cat(outputs)  # T x (b_t, H) -> (R, H), packed: the next layer's input
        finals.append(state)
    out = tuple(torch.stack(s) for s in zip(*finals))  # layers x parts x (N, H) -> parts x (layers, N, H)
    if x.unsorted_indices is not None:
        out = tuple(p.index_select(1, x.unsorted_indices) for p in out)
    return x._replace(data=y), out if isinstance(h, tuple) else out[0]
