"""torch's LSTM a faster way on a CPU, for model.py behind one switch (applies), for the cores whose entry in
model.CORES says lstm_fastpath. There torch's LSTM runs oneDNN's kernel, whose backward is slow for an image
encoder's wide input (docs/results.md): a step goes through torch's lstm_cell, a packed sequence through one input
projection and then one time step at a time."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

# Under bfloat16, oneDNN builds a kernel for every new row count of a matrix product; rounding the rows up to
# a multiple of ROWS (the extra rows' results are dropped) keeps the counts few while the minibatches vary.
ROWS = 16


def _round_up(n: int) -> int:
    return -(-n // ROWS) * ROWS


def applies(x: torch.Tensor | PackedSequence) -> bool:
    """Whether run() takes x: on a CPU, a step or a packed sequence."""
    step = isinstance(x, torch.Tensor) and x.shape[1] == 1
    return x.data.device.type == "cpu" and (step or isinstance(x, PackedSequence))


def run(core: nn.Module, x: torch.Tensor | PackedSequence, state: tuple[torch.Tensor, torch.Tensor]):
    """core(x, (h, c)) for x (B, 1, F) or packed (R, F), h and c (layers, B, H)."""
    h, c = state
    if isinstance(x, torch.Tensor):  # a step: (B, 1, F) -> (B, F), one cell per layer
        y, hs, cs = x[:, 0], [], []
        for k, weights in enumerate(core.all_weights):
            y, c_k = torch.lstm_cell(y, (h[k], c[k]), *weights)
            hs.append(y)
            cs.append(c_k)
        return y[:, None], (torch.stack(hs), torch.stack(cs))  # layers x (B, H) -> (layers, B, H)
    y, sizes = x.data, x.batch_sizes.tolist()
    if x.sorted_indices is not None:  # the sequences longest first, as the packed rows are
        h, c = h.index_select(1, x.sorted_indices), c.index_select(1, x.sorted_indices)
    hs, cs = [], []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(core.all_weights):
        R, N = y.shape[0], sizes[0]
        gx = F.linear(F.pad(y, (0, 0, 0, _round_up(R) - R)), w_ih, b_ih)[:R].float()  # (R, 4H)
        gx = F.pad(gx, (0, 0, 0, N))  # rows for rounded-up steps; their results are dropped
        h_k, c_k, outputs, start = h[k], c[k], [], 0
        for b in sizes:  # the first b sequences have a step here
            rows = min(_round_up(b), N)
            gates = gx[start:start + rows] + F.linear(h_k[:rows], w_hh, b_hh).float()
            i, f, g, o = gates.chunk(4, dim=1)  # (rows, 4H) -> 4 x (rows, H), torch's order
            new_c = torch.sigmoid(f) * c_k[:rows] + torch.sigmoid(i) * torch.tanh(g)
            new_h = torch.sigmoid(o) * torch.tanh(new_c)
            h_k = torch.cat((new_h[:b], h_k[b:]))  # sequences that have ended keep their last state
            c_k = torch.cat((new_c[:b], c_k[b:]))
            outputs.append(h_k[:b])
            start += b
        y = torch.cat(outputs)  # T x (b_t, H) -> (R, H), packed: the next layer's input
        hs.append(h_k)
        cs.append(c_k)
    h, c = torch.stack(hs), torch.stack(cs)  # layers x (N, H) -> (layers, N, H)
    if x.unsorted_indices is not None:
        h, c = h.index_select(1, x.unsorted_indices), c.index_select(1, x.unsorted_indices)
    return x._replace(data=y), (h, c)
