"""Our AdamW takes the same steps as torch.optim.AdamW with the same settings."""
import warnings

import pytest
import torch

from optimizer import AdamW
from tests.devices import DEVICES


def test_adamw_matches_torch():
    torch.manual_seed(0)
    ours_params = [torch.randn(5, 3, requires_grad=True), torch.randn(7, requires_grad=True)]
    torch_params = [p.detach().clone().requires_grad_(True) for p in ours_params]
    ours = AdamW(ours_params, lr=3e-3, weight_decay=0.01)
    reference = torch.optim.AdamW(torch_params, lr=3e-3, weight_decay=0.01, foreach=False)
    for step in range(50):
        grads = [torch.randn_like(p) * (1 + step % 3) for p in ours_params]
        for p, q, g in zip(ours_params, torch_params, grads):
            p.grad, q.grad = g.clone(), g.clone()
        if step == 25:  # a changed learning rate (the schedules) is honoured
            ours.lr = 1e-3
            reference.param_groups[0]["lr"] = 1e-3
        ours.step()
        reference.step()
    for p, q in zip(ours_params, torch_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip():
    p = torch.randn(4, requires_grad=True)
    a = AdamW([p], lr=1e-2)
    p.grad = torch.ones(4)
    a.step()
    b = AdamW([p], lr=5.0)
    b.load_state_dict(a.state_dict())
    assert b.steps == 1 and b.lr == 1e-2 and b.param_groups[0]["weight_decay"] == 0.01
    torch.testing.assert_close(b.exp_avg[0], a.exp_avg[0])


def test_parameter_groups_match_torch():
    """Groups with their own learning rate and weight decay, as torch.optim takes them."""
    torch.manual_seed(1)
    ours_params = [torch.randn(4, 2, requires_grad=True), torch.randn(3, requires_grad=True)]
    torch_params = [p.detach().clone().requires_grad_(True) for p in ours_params]

    def groups(params):
        return [{"params": [params[0]], "lr": 1e-2, "weight_decay": 0.0}, {"params": [params[1]]}]
    ours = AdamW(groups(ours_params), lr=3e-3, weight_decay=0.1)
    reference = torch.optim.AdamW(groups(torch_params), lr=3e-3, weight_decay=0.1, foreach=False)
    for step in range(20):
        for p, q in zip(ours_params, torch_params):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        ours.step()
        reference.step()
    for p, q in zip(ours_params, torch_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert [g["lr"] for g in ours.param_groups] == [1e-2, 3e-3]


def test_the_config_sets_epsilon_and_weight_decay_and_wins_over_a_resumed_checkpoint(tmp_path):
    """optimizer.eps and optimizer.weight_decay reach AdamW; a resume takes them from its config
    (which may change them, e.g. to test the epsilon), not from the saved state."""
    from checkpoint import capture, restore
    from config import config_from_dict
    from trainer import Trainer
    raw = {"n_workers": 4, "worker_steps": 32, "n_mini_batch": 2, "updates": 1,
           "optimizer": {"eps": 1e-5, "weight_decay": 0.0}}
    trainer = Trainer(config_from_dict(raw), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    trainer.one_update()
    assert all(g["eps"] == 1e-5 and g["weight_decay"] == 0.0 for g in trainer.optimizer.param_groups)
    saved = capture(trainer)
    trainer.close()
    changed = Trainer(config_from_dict({**raw, "updates": 2, "optimizer": {"eps": 1e-3, "weight_decay": 0.1}}),
                      summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        restore(changed, saved)
        assert all(g["eps"] == 1e-3 and g["weight_decay"] == 0.1 for g in changed.optimizer.param_groups)
        assert changed.optimizer.steps == trainer.optimizer.steps  # the moments and step count are the saved ones
    finally:
        changed.close()


def test_the_flat_update_is_the_per_parameter_update_to_the_bit_and_keeps_the_parameters_shared():
    """A small group is updated as one flat tensor: the parameters become views of it (the model still
    holds and trains them), and every step equals one parameter at a time exactly; a step where a
    parameter has no gradient falls back to one parameter at a time."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    twin.load_state_dict(model.state_dict())
    flat, loop = AdamW(model.parameters(), lr=1e-2), AdamW(twin.parameters(), lr=1e-2, flat=False)
    assert flat._flat[0] is not None and loop._flat[0] is None
    x = torch.randn(8, 6)
    for step in range(20):
        for net, optimizer in ((model, flat), (twin, loop)):
            optimizer.zero_grad()
            net(x).square().sum().backward()
            if step == 10:
                net[2].bias.grad = None  # no gradient this step
            optimizer.step()
        for a, b in zip(model.parameters(), twin.parameters()):
            assert torch.equal(a, b)
    shared = flat._flat[0][0]
    assert all(p.untyped_storage().data_ptr() == shared.untyped_storage().data_ptr() for p in model.parameters())
    state = flat.state_dict()
    again = AdamW(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).parameters())
    again.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(again.exp_avg_sq, flat.exp_avg_sq))


def test_a_large_group_is_updated_one_parameter_at_a_time():
    from optimizer import FLAT_MAX_VALUES
    big = [torch.zeros(FLAT_MAX_VALUES + 1, requires_grad=True)]
    assert AdamW(big)._flat == [None]


@pytest.mark.parametrize("device", DEVICES)
def test_a_group_is_flattened_on_the_cpu_only(device):
    # on a GPU, views into one flat tensor would take an RNN's weights out of cuDNN's flat buffer
    rnn = torch.nn.GRU(3, 4).to(device)
    optimizer = AdamW(rnn.parameters())
    assert (optimizer._flat[0] is not None) == (device == "cpu")
    if device == "cuda":
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "RNN module weights are not part of single contiguous chunk"
            rnn(torch.zeros(2, 1, 3, device=device))


def _twins(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.GRU(5, 4, batch_first=True))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.GRU(5, 4, batch_first=True))
    twin.load_state_dict(model.state_dict())
    return model, twin


@pytest.mark.parametrize("max_norm", [1e-3, 1e3])  # clipped, and left as it is
def test_the_flat_gradients_clip_as_torch_clips(max_norm):
    """backward() adds into views of one flat gradient (zero_grad() points .grad at them), and
    clip_grad_norm() gives the norm and the scaled gradients torch.nn.utils.clip_grad_norm_ gives."""
    model, twin = _twins(3)
    flat = AdamW(model.parameters())
    x = torch.randn(3, 7, 6)
    flat.zero_grad()
    model(x)[0].square().sum().backward()
    twin.zero_grad()
    twin(x)[0].square().sum().backward()
    gradient = flat._flat[0][3]
    assert all(p.grad.untyped_storage().data_ptr() == gradient.untyped_storage().data_ptr()
               for p in model.parameters())
    assert flat._flat_grad(0) is gradient
    ours = flat.clip_grad_norm(max_norm)
    reference = torch.nn.utils.clip_grad_norm_(twin.parameters(), max_norm)
    torch.testing.assert_close(ours, reference)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert (ours > max_norm) == (max_norm == 1e-3)  # the first case really clips


def test_a_gradient_set_from_outside_takes_the_step_without_the_flat_gradient():
    """A .grad replaced after zero_grad() (not the view any more): clipping and the step read the
    parameters' own gradients, and the step still equals one parameter at a time to the bit."""
    model, twin = _twins(4)
    flat, loop = AdamW(model.parameters(), lr=1e-2), AdamW(twin.parameters(), lr=1e-2, flat=False)
    x = torch.randn(2, 5, 6)
    for step in range(6):
        for net, optimizer in ((model, flat), (twin, loop)):
            optimizer.zero_grad()
            net(x)[0].sum().backward()
            if step % 2:
                net[0].weight.grad = net[0].weight.grad * 3  # a new tensor, not the flat gradient's view
            optimizer.clip_grad_norm(0.1)
            optimizer.step()
        assert (flat._flat_grad(0) is None) == bool(step % 2)
        for a, b in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
