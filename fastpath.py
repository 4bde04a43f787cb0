"""The training pass's faster ways on a CPU, each proven equal to the plain one (tests/test_fastpath.py): sequences()
feeds the cores the real steps alone where padding would cost more; call() runs torch's LSTM without oneDNN's kernel,
whose backward is slow for an image encoder's wide input (docs/results.md)."""
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

# packed at half the slots padding, and for torch's own layers at an image encoder's width (docs/how-it-works.md)
PACK_MIN_WIDTH = 2048
PACK_MIN_PADDING = 0.5

# Under bfloat16, oneDNN builds a kernel for every new row count of a matrix product; rounding the rows up to
# a multiple of ROWS (the extra rows' results are dropped) keeps the counts few while the minibatches vary.
ROWS = 16


def _round_up(n: int) -> int:
    return -(-n // ROWS) * ROWS


def sequences(run_cores: Callable, x: torch.Tensor, mask: torch.Tensor, state: torch.Tensor, core):
    """run_cores(x, state)'s outputs at the real steps (R, cores x H), for x (N, L, F) padded where mask (N, L) is
    False: on a CPU, for a core whose entry (config.CORES) says it takes them, from the real steps alone."""
    N, L, F_in = x.shape
    lengths = mask.sum(1)
    wide = core.torch_rnn and F_in >= PACK_MIN_WIDTH
    if x.device.type != "cpu" or not core.packed or not (wide or lengths.sum() <= (1 - PACK_MIN_PADDING) * N * L):
        return run_cores(x, state)[0][mask]
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    y, _ = run_cores(packed, state)  # (R, cores x H) in the packed order: time step by time step
    return pad_packed_sequence(packed._replace(data=y), batch_first=True, total_length=L)[0][mask]


def call(core: nn.Module, x: torch.Tensor | PackedSequence, state):
    """core(x, state), torch's LSTM on a CPU a faster way for a step or a packed sequence."""
    step = isinstance(x, torch.Tensor) and x.shape[1] == 1
    if type(core) is nn.LSTM and x.data.device.type == "cpu" and (step or isinstance(x, PackedSequence)):
        return _lstm(core, x, state)
    return core(x, state)


def _lstm(core: nn.LSTM, x: torch.Tensor | PackedSequence, state: tuple[torch.Tensor, torch.Tensor]):
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
