"""Memory models ("cores") beyond torch's own, in plain torch next to their papers; config.CORES declares each core.
core(x (N, L, F), state) -> (outputs (N, L, H), state), the state (layers, N, H) or a tuple of state_parts of them.
L steps at once must equal L single steps: the rollout steps a core, the training pass runs whole sequences."""
import contextlib
import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence


def linear_recurrence(a: torch.Tensor, b: torch.Tensor, h: torch.Tensor, scan_min_length: dict[str, int],
                      mul: Callable = torch.mul) -> torch.Tensor:
    """h_t = a_t h_{t-1} + b_t for a (N or 1, L, ...), b (N, L, ...) from h (N, ...) -> every h_t (N, L, ...): a scan
    where L >= scan_min_length[device type], else a loop. mul: torch.mul, or complex_mul for complex real pairs."""
    b = torch.cat((mul(a[:, :1], h[:, None]) + b[:, :1], b[:, 1:]), dim=1)  # h folded into the first step
    if b.shape[1] >= scan_min_length.get(b.device.type, scan_min_length["cuda"]):
        return scan(a, b, mul)
    return loop(a, b, mul)


def packed_recurrence(a: torch.Tensor, b: torch.Tensor, h: torch.Tensor, x: PackedSequence,
                      mul: Callable = torch.mul) -> tuple[torch.Tensor, torch.Tensor]:
    """linear_recurrence over x's real steps alone: a (R, ...) or one a (...) for all, b (R, ...) in packed order, h
    (N, ...) in batch order -> every h_t (R, ...) in packed order, each sequence's last h_t (N, ...). The R steps are
    scanned as one flat sequence reset (a = 0) at each start: faster than stepping the (mostly padding) sequences."""
    rows, _ = pad_packed_sequence(x._replace(data=torch.arange(len(b), device=b.device)), batch_first=True,
                                  padding_value=-1)  # (N, T): the packed row of each sequence's step t
    mask = rows >= 0
    index = rows[mask]  # the packed rows sequence by sequence
    a = a.expand_as(b) if a.dim() < b.dim() else a[index]
    b = b[index]
    ends = mask.sum(1).cumsum(0)  # (N,): one past each sequence's last row in that order
    first = torch.cat((ends.new_zeros(1), ends[:-1]))  # each sequence's first row in that order
    b = b.index_add(0, first, mul(a[first], h))  # h folded into each sequence's first step
    hs = scan(a.index_fill(0, first, 0)[None], b[None], mul)[0]  # (1, R, ...): no step before a first one
    return torch.empty_like(hs).index_copy(0, index, hs), hs[ends - 1]


def loop(a: torch.Tensor, b: torch.Tensor, mul: Callable = torch.mul) -> torch.Tensor:
    """h_t = a_t h_{t-1} + b_t from h_{-1} = 0, one step at a time."""
    h, hs = torch.zeros_like(b[:, 0]), []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):  # unbind: the backward stacks the steps' gradients once
        h = mul(a_t, h) + b_t
        hs.append(h)
    return torch.stack(hs, dim=1)  # L x (N, ...) -> (N, L, ...)


def scan(a: torch.Tensor, b: torch.Tensor, mul: Callable = torch.mul, chunk: int = 16) -> torch.Tensor:
    """The same as loop(), in chunks of `chunk` steps: all chunks are stepped through at once from h = 0, each keeping
    the product of its a's so far; the chunks' last states are then scanned the same way, as a sequence whose a's are
    the chunks' products; and each step adds the state before its chunk times its product so far."""
    L = b.shape[1]
    if L <= chunk:
        return loop(a, b, mul)
    K = -(-L // chunk)
    a, b = (torch.cat((t, t.new_zeros(t.shape[0], K * chunk - L, *t.shape[2:])), dim=1)  # zero steps after the last
            for t in (a, b))
    a, b = (t.unflatten(1, (K, chunk)) for t in (a, b))  # (N, K*C, ...) -> (N, K, C, ...)
    (a0, *a_steps), (b0, *b_steps) = a.unbind(2), b.unbind(2)
    hs, ps = [b0], [a0]
    for a_j, b_j in zip(a_steps, b_steps):
        hs.append(mul(a_j, hs[-1]) + b_j)
        ps.append(mul(a_j, ps[-1]))
    hs, ps = torch.stack(hs, dim=2), torch.stack(ps, dim=2)  # C x (N, K, ...) -> (N, K, C, ...)
    ends = scan(ps[:, :, -1], hs[:, :, -1], mul, chunk)  # (N, K, ...): the state at each chunk's last step
    incoming = torch.cat((torch.zeros_like(ends[:, :1]), ends[:, :-1]), dim=1)  # the state before each chunk
    hs = hs + mul(ps, incoming[:, :, None])
    return hs.flatten(1, 2)[:, :L]  # (N, K, C, ...) -> (N, K*C, ...) -> (N, L, ...)


def complex_mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x * y for complex numbers held as (..., 2) real pairs (real, imaginary): ONNX has no complex tensors."""
    (xr, xi), (yr, yi) = x.unbind(-1), y.unbind(-1)
    return torch.stack((xr * yr - xi * yi, xr * yi + xi * yr), dim=-1)


class MinGRU(nn.Module):
    """minGRU (Feng et al. 2024, "Were RNNs All We Needed?", sec. 3.1.2): the GRU's gates from the input alone,
        z_t = sigmoid(Linear_z(x_t)),  h~_t = Linear_h(x_t),  h_t = (1 - z_t) * h_{t-1} + z_t * h~_t,
    a recurrence linear in h, which a sequence runs as a parallel scan."""
    # the faster path at each length, as tools/core_speed.py measured it (docs/results.md, "Speed per core")
    scan_min_length = {"cpu": 256, "cuda": 16}

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(input_size, 2 * hidden_size)  # Linear_z and Linear_h side by side

    def forward(self, x: torch.Tensor | PackedSequence, h: torch.Tensor):  # x (N, L, F) or packed (R, F), h (1, N, H)
        packed = isinstance(x, PackedSequence)
        zh = self.linear(x.data if packed else x).float()  # (.., 2H) from a PackedSequence's rows or (N, L, F)
        z, h_tilde = zh.chunk(2, dim=-1)  # (.., 2H) -> 2 x (.., H), the state in float32
        z = torch.sigmoid(z)
        if packed:
            hs, last = packed_recurrence(1 - z, z * h_tilde, h[0], x)  # (R, H), (N, H)
            return x._replace(data=hs), last[None]
        hs = linear_recurrence(1 - z, z * h_tilde, h[0], self.scan_min_length)  # (N, L, H)
        return hs, hs[:, -1:].transpose(0, 1)  # the last step's state (N, 1, H) -> (1, N, H)


class LRU(nn.Module):
    """Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks for Long Sequences",
    eq. 1 with sec. 3.3's exponential parametrisation and normalisation): a diagonal complex recurrence
        h_t = lambda * h_{t-1} + gamma * (B x_t),  y_t = GELU(Re(C h_t) + D x_t),
        lambda = exp(-exp(nu) + i exp(theta)),  gamma = sqrt(1 - |lambda|^2) at the start, then learned.
    The GELU is the paper's blocks' nonlinearity after each LRU, so that stacked layers are not one linear system.
    D is a full matrix, the input and output widths differing here. Complex numbers are (..., 2) real pairs."""
    scan_min_length = {"cpu": 128, "cuda": 16}

    def __init__(self, input_size: int, hidden_size: int, r_min: float = 0.0, r_max: float = 1.0,
                 max_phase: float = 2 * math.pi):
        super().__init__()
        self.hidden_size = hidden_size
        # lambda uniform on the ring r_min <= |lambda| <= r_max, its phase uniform in [0, max_phase] (Lemma 3.2)
        radius2 = torch.empty(hidden_size).uniform_(r_min ** 2, r_max ** 2).clamp(min=1e-8)
        self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(radius2)))
        self.theta_log = nn.Parameter(torch.log(max_phase * torch.rand(hidden_size).clamp(min=1e-8)))
        self.gamma_log = nn.Parameter(0.5 * torch.log(1 - radius2))
        self.B = nn.Linear(input_size, 2 * hidden_size, bias=False)  # B's real rows, then its imaginary rows
        self.C = nn.Linear(2 * hidden_size, hidden_size, bias=False)  # Re(C h) = C_re h_re - C_im h_im, one matrix
        self.D = nn.Linear(input_size, hidden_size, bias=False)
        nn.init.normal_(self.B.weight, std=1 / math.sqrt(2 * input_size))
        nn.init.normal_(self.C.weight, std=1 / math.sqrt(hidden_size))
        nn.init.normal_(self.D.weight, std=1 / math.sqrt(input_size))

    def forward(self, x: torch.Tensor | PackedSequence, state: tuple[torch.Tensor, torch.Tensor]):
        """x (N, L, F) or packed (R, F), state 2 x (1, N, H): the real and imaginary parts."""
        H, packed = self.hidden_size, isinstance(x, PackedSequence)
        phase = torch.exp(self.theta_log)
        lam = torch.exp(-torch.exp(self.nu_log))[:, None] * torch.stack((phase.cos(), phase.sin()), dim=-1)  # (H, 2)
        inputs = x.data if packed else x  # a PackedSequence's rows (R, F)
        bx = self.B(inputs).float().unflatten(-1, (2, H)).transpose(-1, -2)  # (.., 2H) -> (.., 2, H) -> (.., H, 2)
        bx = bx * torch.exp(self.gamma_log)[:, None]
        h = torch.stack(state, dim=-1)[0]  # 2 x (1, N, H) -> (1, N, H, 2) -> (N, H, 2)
        if packed:
            hs, last = packed_recurrence(lam, bx, h, x, complex_mul)  # (R, H, 2)
            last = last[None]  # (N, H, 2) -> (1, N, H, 2)
        else:
            a = lam.expand(1, bx.shape[1], H, 2)  # (H, 2) -> (1, L, H, 2): one lambda for every sequence, scanned once
            hs = linear_recurrence(a, bx, h, self.scan_min_length, complex_mul)  # (N, L, H, 2)
            last = hs[:, -1:].transpose(0, 1)  # (N, 1, H, 2) -> (1, N, H, 2)
        y = F.gelu(self.C(hs.transpose(-1, -2).flatten(-2)) + self.D(inputs))  # (.., H, 2) -> (.., 2H) -> (.., H)
        return (x._replace(data=y) if packed else y), (last[..., 0], last[..., 1])


def sinusoid(positions: torch.Tensor, width: int) -> torch.Tensor:
    """The absolute positional encoding of Vaswani et al. 2017 (sec. 3.5), for positions (...) -> (..., width)."""
    frequencies = 10000.0 ** (-torch.arange(0, width, 2, device=positions.device) / width)  # (width / 2,)
    angles = positions.float()[..., None] * frequencies  # (..., width / 2)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)[..., :width]


class Gate(nn.Module):
    """GTrXL's GRU-type gate in place of a residual sum (Parisotto et al. 2020, eq. 8-11):
        r = sigmoid(W_r y + U_r x),  z = sigmoid(W_z y + U_z x - b_g),  h = tanh(W_g y + U_g (r * x)),
        g(x, y) = (1 - z) * x + z * h,
    with b_g = 2 at the start, so that a block starts close to the identity."""

    def __init__(self, width: int, bias: float = 2.0):
        super().__init__()
        self.W = nn.Linear(width, 3 * width)  # W_r, W_z, W_g side by side
        self.U = nn.Linear(width, 2 * width, bias=False)  # U_r, U_z
        self.U_g = nn.Linear(width, width, bias=False)
        self.bias = bias

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        wr, wz, wg = self.W(y).chunk(3, dim=-1)
        ur, uz = self.U(x).chunk(2, dim=-1)
        r, z = torch.sigmoid(wr + ur), torch.sigmoid(wz + uz - self.bias)
        return (1 - z) * x + z * torch.tanh(wg + self.U_g(r * x))


class Block(nn.Module):
    """One pre-layer-norm Transformer block: attention from the queries over the keys and values, then a
    position-wise feed-forward layer, each added to its input (or gated in, GTrXL)."""

    def __init__(self, width: int, heads: int, gated: bool):
        super().__init__()
        self.heads = heads
        self.norm_q, self.norm_kv, self.norm_ff = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.kv, self.out = nn.Linear(width, width), nn.Linear(width, 2 * width), nn.Linear(width, width)
        self.ff = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.gates = nn.ModuleList((Gate(width), Gate(width))) if gated else None

    def forward(self, x: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (N, L, D) queries, kv (N, K, 2D) keys and values; mask (N, 1, L, K), True where a query may look, or
        (N, heads, L, K) added to the scores."""
        (N, L, D), K = x.shape, kv.shape[1]
        q = self.q(self.norm_q(x)).view(N, L, self.heads, -1).transpose(1, 2)  # (N, L, D) -> (N, heads, L, D / heads)
        k, v = (t.view(N, K, self.heads, -1).transpose(1, 2) for t in kv.chunk(2, dim=-1))  # 2 x (N, heads, K, D / h)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, heads, L, D / heads)
        a = self.out(attended.transpose(1, 2).reshape(N, L, D))  # -> (N, L, heads, D / heads) -> (N, L, D)
        x = x + a if self.gates is None else self.gates[0](x, torch.relu(a))
        y = self.ff(self.norm_ff(x))
        return x + y if self.gates is None else self.gates[1](x, torch.relu(y))


class TransformerXL(nn.Module):
    """Transformer-XL as a memory (Dai et al. 2019, sec. 3.2: each block attends over the cached inputs of the steps
    before, held without gradient), over a sliding window as the Memory Gym paper uses it (Pleines et al. 2025):
    step t's query in block b is its input x_t^b, its keys and values x^b of steps t - W .. t; pre-layer-norm blocks,
    gated as GTrXL's with `gated`; positional_encoding absolute, relative (Shaw et al. 2018, T5's bias per distance
    back) or none. A row's state: its step counter, then each block's inputs of the last W steps, oldest first.

    The attention mask of L = 2 steps over W = 3 slots, for a row whose counter is 2 (two steps taken; the oldest
    slot holds nothing), keys [slot 0, slot 1, slot 2, step 0, step 1], `back` the distance from query to key:
        step 0: back 3 2 1 0 -1 -> mask . x x x .   (slot 0: position -1, empty; step 1: after the query)
        step 1: back 4 3 2 1  0 -> mask . . x x x   (slot 0 too far back; window W + 1 keys, itself included)"""
    def __init__(self, input_size: int, recurrence):
        super().__init__()
        D, self.W, self.layers = recurrence.hidden_state_size, recurrence.memory_length, recurrence.num_layers
        self.width, self.encoding, heads = D, recurrence.positional_encoding, recurrence.attention_heads
        self.project = nn.Linear(input_size, D)
        self.blocks = nn.ModuleList(Block(D, heads, recurrence.gated) for _ in range(self.layers))
        if self.encoding == "relative":
            self.distance_bias = nn.Parameter(torch.zeros(self.layers, heads, self.W + 1))  # (blocks, heads, back)
        self.state_size = 1 + self.layers * self.W * D
        self._cache = None  # in caching(): (counters (N, 1), each block's window keys and values (N, W, 2D)) or ()

    @contextlib.contextmanager
    def caching(self):
        """Within it the weights do not change (a rollout): a step takes its window's keys and values from the step
        before where its state is the one that step returned (or reset: masked); any other is projected in full."""
        self._cache = ()
        try:
            yield
        finally:
            self._cache = None

    def _window(self, counter: torch.Tensor) -> tuple | None:
        """The cached keys and values of the windows of rows at `counter` (N, 1), where they are those."""
        if not self._cache or self._cache[0].shape != counter.shape:
            return None
        return self._cache[1] if bool(((counter == self._cache[0]) | (counter == 0)).all()) else None

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (N, L, F), state (N, 1 + layers x W x D) -> outputs (N, L, D), state."""
        (N, L, _), W, D = x.shape, self.W, self.width
        counter = state[:, :1]  # (N, 1): the steps taken since the state was zeros
        memory = state[:, 1:].view(N, self.layers, W, D)  # (N, layers x W x D) -> (N, layers, W, D)
        # key k of the window and the sequence, [memory slots 0..W-1, steps 0..L-1], is `back` steps before query s
        key = torch.arange(W + L, device=x.device)
        back = torch.arange(L, device=x.device)[:, None] + W - key  # (L, W + L)
        positions = counter - W + key  # (N, W + L): the keys' steps in the episode; < 0: a slot that holds nothing
        mask = ((back >= 0) & (back <= W) & ((positions[:, None] >= 0) | (key >= W)))[:, None]  # (N, 1, L, W + L)
        h, inputs, windows, cached = self.project(x), [], [], self._window(counter)
        for b, block in enumerate(self.blocks):
            inputs.append(h)
            context = torch.cat((memory[:, b].to(h.dtype), h), dim=1)  # (N, W + L, D)
            if self.encoding == "absolute":
                context = context + sinusoid(positions, D).to(h.dtype)  # (N, W + L, D)
            if cached:  # the window's from the step before; the new steps' projected here
                kv = torch.cat((cached[b], block.kv(block.norm_kv(context[:, W:]))), dim=1)  # (N, W + L, 2D)
            else:
                kv = block.kv(block.norm_kv(context))  # the keys and values side by side
            windows.append(kv[:, -W:])
            scores = mask
            if self.encoding == "relative":  # (heads, L, W + L) by distance, -inf where the mask says no
                bias = self.distance_bias[b][:, back.clamp(0, W)].to(h.dtype)
                scores = bias.masked_fill(~mask, float("-inf"))  # -> (N, heads, L, W + L)
            h = block(h, kv, scores)
        new_memory = torch.stack([torch.cat((memory[:, b], i.float()), dim=1)[:, -W:] for b, i in enumerate(inputs)],
                                 dim=1)  # layers x (N, W, D) -> (N, layers, W, D)
        if self._cache is not None and not torch.is_grad_enabled():
            self._cache = (counter + L, windows)
        return h, torch.cat((counter + L, new_memory.flatten(1)), dim=1)  # (N, 1 + layers x W x D)
