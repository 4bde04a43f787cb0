"""How the action distributions draw actions, against hand calculations: the deterministic action,
the sampling frequencies (and for the Gaussian the exact seeded draw), the log-prob returned with a
sample, one column per MultiDiscrete branch, and the mask rows that allow nothing (padding);
which distribution each action space gets. (The log-prob and entropy formulas against
torch.distributions, and masked actions never being drawn, are in test_spaces.py.)"""
import math

import gymnasium as gym
import numpy as np
import torch

from distributions import Bernoulli, Categorical, Gaussian, make_distribution


def log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


def test_bernoulli_deterministic_action_is_one_exactly_where_the_logit_is_positive():
    """A logit of exactly 0 (probability 1/2) gives 0; every row gives the same action, so no random draw enters."""
    logits = [-3.0, -0.5, 0.0, 0.5, 3.0]
    torch.manual_seed(0)
    actions, log_prob = Bernoulli(5).sample(torch.tensor([logits] * 200), None, deterministic=True)
    assert actions.dtype == torch.int64
    assert actions.tolist() == [[0, 0, 0, 1, 1]] * 200
    # log p of the chosen actions: log sigmoid(x) for a 1, log sigmoid(-x) for a 0
    expected = sum(log_sigmoid(x if x > 0 else -x) for x in logits)
    torch.testing.assert_close(log_prob, torch.full((200,), expected))


def test_bernoulli_samples_each_entry_with_its_probability():
    p = torch.tensor([0.1, 0.5, 0.9])
    torch.manual_seed(0)
    actions, log_prob = Bernoulli(3).sample((p / (1 - p)).log().expand(20000, 3), None, deterministic=False)
    # 20000 draws: the frequency's standard deviation is at most 0.0036
    torch.testing.assert_close(actions.float().mean(0), p, atol=0.02, rtol=0)
    expected = [sum(math.log(q if a else 1 - q) for a, q in zip(row, p.tolist())) for row in actions[:50].tolist()]
    torch.testing.assert_close(log_prob[:50], torch.tensor(expected))


def test_bernoulli_never_draws_an_entry_whose_probability_is_exactly_zero():
    """sigmoid(-200) is 0 in float32, and torch.rand can return exactly 0.0 (one draw in 2^24): the draw
    is uniform on [0, 1), so `u < p` is never true for p = 0 while `u <= p` would be."""
    torch.manual_seed(146)
    assert (torch.rand(8192, 8) == 0).any(), "this seed no longer draws an exact 0.0: pick another"
    torch.manual_seed(146)
    actions, log_prob = Bernoulli(8).sample(torch.full((8192, 8), -200.0), None, deterministic=False)
    assert not actions.any()
    assert (log_prob == 0).all()  # log(1 - 0) for every entry


def _gaussian(log_std: list[float]) -> Gaussian:
    d = Gaussian(len(log_std))
    with torch.no_grad():
        d.log_std.copy_(torch.tensor(log_std))
    return d


def test_gaussian_deterministic_action_is_the_mean():
    d = _gaussian([-1.0, 0.0, 0.5])
    mean = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    actions, log_prob = d.sample(mean, None, deterministic=True)
    assert torch.equal(actions, mean)
    # at the mean z = 0: log p = sum over entries of (-log_std - log(2 pi) / 2)
    expected = sum(-s - 0.5 * math.log(2 * math.pi) for s in (-1.0, 0.0, 0.5))
    torch.testing.assert_close(log_prob, torch.full((4,), expected))


def test_gaussian_sample_is_the_mean_plus_std_times_the_seeded_normal_draw():
    """The exact draw, not only its distribution: a seeded run must give the same actions every time."""
    log_std = [-1.0, 0.0, 0.5]
    d = _gaussian(log_std)
    mean = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    actions, log_prob = d.sample(mean, None, deterministic=False)
    torch.manual_seed(1)
    noise = torch.randn(4, 3)
    expected = [[m + math.exp(s) * e for m, s, e in zip(means, log_std, draws)]
                for means, draws in zip(mean.tolist(), noise.tolist())]
    torch.testing.assert_close(actions, torch.tensor(expected))
    # log N(a; m, std) summed over the entries: -(e^2)/2 - log_std - log(2 pi)/2, e the standard normal draw
    expected = [sum(-0.5 * e * e - s - 0.5 * math.log(2 * math.pi) for s, e in zip(log_std, draws))
                for draws in noise.tolist()]
    torch.testing.assert_close(log_prob, torch.tensor(expected))


def log_softmax(logits: list[float], allowed: list[bool]) -> list[float]:
    """log p over the allowed entries (-inf elsewhere); a row allowing nothing allows everything."""
    if not any(allowed):
        allowed = [True] * len(logits)
    norm = math.log(sum(math.exp(x) for x, a in zip(logits, allowed) if a))
    return [x - norm if a else -math.inf for x, a in zip(logits, allowed)]


def entropy(lp: list[float]) -> float:
    return -sum(math.exp(v) * v for v in lp if v > -math.inf)


def test_categorical_deterministic_action_is_the_most_probable_one_of_each_branch():
    logits = torch.tensor([[0.1, 2.0, -1.0, 0.5, 0.2], [3.0, 0.0, 1.0, -2.0, 4.0]])
    actions, log_prob = Categorical([3, 2]).sample(logits, None, deterministic=True)
    assert actions.tolist() == [[1, 0], [0, 1]]
    rows = logits.tolist()
    expected = [log_softmax(r[:3], [True] * 3)[a] + log_softmax(r[3:], [True] * 2)[b]
                for r, (a, b) in zip(rows, actions.tolist())]
    torch.testing.assert_close(log_prob, torch.tensor(expected))
    single, log_prob = Categorical([5]).sample(logits, None, deterministic=True)
    assert single.tolist() == [[1], [4]]
    torch.testing.assert_close(log_prob, torch.tensor([log_softmax(r, [True] * 5)[a] for r, (a,) in
                                                       zip(rows, single.tolist())]))


def test_categorical_samples_each_branch_with_its_probabilities():
    p, q = [0.7, 0.2, 0.1], [0.4, 0.6]
    logits = torch.tensor([math.log(x) for x in p + q]).expand(20000, 5)
    torch.manual_seed(0)
    actions, log_prob = Categorical([3, 2]).sample(logits, None, deterministic=False)
    assert actions.shape == (20000, 2) and actions.dtype == torch.int64
    # 20000 draws: the frequency's standard deviation is at most 0.0036
    torch.testing.assert_close(torch.bincount(actions[:, 0], minlength=3) / 20000, torch.tensor(p), atol=0.02, rtol=0)
    torch.testing.assert_close(torch.bincount(actions[:, 1], minlength=2) / 20000, torch.tensor(q), atol=0.02, rtol=0)
    expected = [math.log(p[a]) + math.log(q[b]) for a, b in actions[:50].tolist()]
    torch.testing.assert_close(log_prob[:50], torch.tensor(expected))


def test_a_mask_row_that_allows_nothing_allows_everything():
    """Such a row is the buffer's zero padding row: its log-probs and entropy stay finite, with one
    branch and with several; the other row of each batch is masked as usual."""
    logits = torch.tensor([[0.3, -1.0, 2.0, 0.5, 0.1], [1.0, 0.0, -0.5, 2.0, 0.7]])
    rows = logits.tolist()
    one = torch.tensor([[False, True, False, True, True], [False] * 5])  # one branch of 5
    log_prob, ent = Categorical([5]).evaluate(logits, torch.tensor([[3], [0]]), one)
    lps = [log_softmax(r, m) for r, m in zip(rows, one.tolist())]
    torch.testing.assert_close(log_prob, torch.tensor([lps[0][3], lps[1][0]]))
    torch.testing.assert_close(ent, torch.tensor([entropy(lp) for lp in lps]))
    two = torch.tensor([[True, False, False, True, True], [False] * 5])  # branches of 2 and 3
    log_prob, ent = Categorical([2, 3]).evaluate(logits, torch.tensor([[0, 2], [1, 0]]), two)
    lps = [(log_softmax(r[:2], m[:2]), log_softmax(r[2:], m[2:])) for r, m in zip(rows, two.tolist())]
    torch.testing.assert_close(log_prob, torch.tensor([lps[0][0][0] + lps[0][1][2], lps[1][0][1] + lps[1][1][0]]))
    torch.testing.assert_close(ent, torch.tensor([entropy(a) + entropy(b) for a, b in lps]))
    actions, log_prob = Categorical([2, 3]).sample(logits, two, deterministic=True)
    assert actions.tolist() == [[0, 1], [0, 1]]  # row 0's second branch: the best allowed action, not 0
    torch.testing.assert_close(log_prob, torch.tensor([lps[0][0][0] + lps[0][1][1], lps[1][0][0] + lps[1][1][1]]))


def test_each_action_space_gets_its_distribution_with_its_sizes():
    """MultiDiscrete and MultiBinary of any shape are flattened in row-major order."""
    d = make_distribution(gym.spaces.Discrete(4))
    assert isinstance(d, Categorical) and d.nvec == [4] and d.n_params == 4
    d = make_distribution(gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 1]])))
    assert isinstance(d, Categorical) and d.nvec == [2, 3, 4, 1] and d.n_params == d.n_features == 10
    d = make_distribution(gym.spaces.MultiBinary((2, 3)))
    assert isinstance(d, Bernoulli) and d.n_params == d.n_features == 6
    d = make_distribution(gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    assert isinstance(d, Gaussian) and d.n_params == d.n_features == 3 and d.log_std.shape == (3,)


def test_a_multidiscrete_branch_that_allows_nothing_allows_everything_and_the_others_keep_their_masks():
    """A branch with no allowed action is treated as allowing all of them, like a padding row, while
    the other branches of the row keep their masks (it gave NaN log-probs and entropy before)."""
    logits = torch.tensor([[0.3, -1.0, 2.0, 0.5, 0.1]])
    mask = torch.tensor([[False, False, True, False, True]])  # branch 1 of 2: nothing; branch 2 of 3: two
    row, allowed = logits[0].tolist(), mask[0].tolist()
    a, b = log_softmax(row[:2], allowed[:2]), log_softmax(row[2:], allowed[2:])
    log_prob, ent = Categorical([2, 3]).evaluate(logits, torch.tensor([[1, 2]]), mask)
    torch.testing.assert_close(log_prob, torch.tensor([a[1] + b[2]]))
    torch.testing.assert_close(ent, torch.tensor([entropy(a) + entropy(b)]))
