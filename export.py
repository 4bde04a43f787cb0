"""Writes a trained agent as one ONNX graph, for programs without torch: `python export.py --help` says how;
docs/export.md describes the graph and how to carry its recurrent state."""
from plumbing import script

script.begin(__name__)  # the imports below take seconds

import contextlib
import io
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from normalization import normalize
from plumbing import stopping
from plumbing.atomic import write_atomically
from plumbing.cli import ArgumentParser, check_output, require
from plumbing.errors import ConfigError
from plumbing.files import reason
from spaces import SpaceError, action_format

# ONNX Runtime has run opset 18 since 1.14, and so do its C, C++, C#, Java and JavaScript packages
OPSET = 18
# every graph's outputs; a Box action space's adds log_std (the Gaussian's parameter, not a head output)
OUTPUTS = ("params", "action", "value", "next_state")
TOLERANCE = 1e-4  # values, states and Box actions, absolute and relative; other actions must be equal


class ExportError(ValueError):
    """A model that cannot be written as an ONNX graph; the message is one line that names what cannot."""


class Step(nn.Module):
    """Agent.act(deterministic=True) as one module: frozen normaliser, episode-start resets, value in return units."""

    def __init__(self, agent):
        super().__init__()
        self.model, normalizers = agent.model, agent.normalizers
        self.obs_normalizer = normalizers and normalizers.observations
        if self.obs_normalizer is not None:  # its statistics, frozen into the graph (mean and std in float64)
            for name, value in zip(("features", "mean", "std"), self.obs_normalizer.frozen()):
                self.register_buffer(name, value)
        self.values = normalizers and normalizers.values
        self.log_std = getattr(self.model.distribution, "log_std", None)  # a Gaussian's

    def forward(self, obs, state, episode_start, previous_action=None, previous_reward=None, action_mask=None):
        model = self.model
        if self.obs_normalizer is not None:
            obs = normalize(obs, self.features, self.mean, self.std, self.obs_normalizer.clip)
        state = model.reset_state(state, episode_start)
        previous = None
        if model.previous_size:
            actions = state[:, :0] if previous_action is None else previous_action  # no action: its batch alone
            previous = model.previous_input(actions, previous_reward, episode_start)
        out = model.act(obs, state, True, action_mask, previous)
        values = out.values if self.values is None else self.values.denormalize(out.values)
        outputs = (out.policy_outputs, out.actions, values, out.state)
        return outputs if self.log_std is None else (*outputs, self.log_std.detach().expand_as(out.policy_outputs))


def example_inputs(agent, batch: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """The graph's inputs by name: zero observations, actions and rewards; a random state with a generator."""
    model, recurrence = agent.model, agent.config.recurrence
    layout, actions = model.observation_layout, action_format(agent.action_space)
    state = model.initial_state(batch)
    inputs = {"obs": torch.from_numpy(np.zeros((batch, *layout.shape), layout.dtype)),
              "state": state if generator is None else torch.randn(state.shape, generator=generator),
              "episode_start": torch.arange(batch) % 2 == 0}
    if recurrence.previous_action:
        inputs["previous_action"] = torch.from_numpy(np.zeros((batch, actions.size), actions.dtype))
    if recurrence.previous_reward:
        inputs["previous_reward"] = torch.zeros(batch)
    if agent.masked:
        inputs["action_mask"] = torch.ones(batch, actions.mask_size, dtype=torch.bool)
    return inputs


def output_names(agent) -> list[str]:
    return [*OUTPUTS, *(["log_std"] if hasattr(agent.model.distribution, "log_std") else [])]


def to_onnx(agent, source: str = ""):
    """The agent's Step as an ONNX model (a dynamic batch axis, the config in its metadata), else an ExportError."""
    import onnx
    step, inputs = Step(agent).eval(), example_inputs(agent, 3)  # a batch above 1: size 1 would be fixed
    batch = torch.export.Dim("batch")
    logger = logging.getLogger("torch.onnx")  # its notes on optional packages (torchvision) are not ours
    level = logger.level
    try:  # the exporter's own progress lines and warnings: the one line below says what happened
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            logger.setLevel(logging.ERROR)
            program = torch.onnx.export(step, (), kwargs=inputs, dynamo=True, external_data=False,
                                        opset_version=OPSET, input_names=list(inputs), output_names=output_names(agent),
                                        dynamic_shapes={name: {0: batch} for name in inputs})
        proto = program.model_proto
        onnx.checker.check_model(proto, full_check=True)
    except Exception as error:  # the exporter raises many types, each as long as a traceback
        raise ExportError(f"{_what(agent)} cannot be exported to ONNX: {reason(error, 300)}") from None
    finally:
        logger.setLevel(level)
    onnx.helper.set_model_props(proto, {
        "config": json.dumps(agent.config.to_dict()), "source": source, "state_size": str(agent.model.state_size),
        "docs": "docs/export.md: the inputs, the outputs and the recurrent state"})
    return proto


def _what(agent) -> str:
    core = type(agent.model.core)
    return (f"recurrence.layer_type '{agent.config.recurrence.layer_type}' ({core.__module__}.{core.__name__}) "
            f"with the {type(agent.model.distribution).__name__} action distribution")


def check_against_torch(agent, proto) -> None:
    """ExportError unless the graph in ONNX Runtime matches the torch model on random states (within TOLERANCE)."""
    import onnxruntime
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = example_inputs(agent, 4, torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = Step(agent).eval()(**inputs)
    got = session.run(None, {name: value.numpy() for name, value in inputs.items()})
    for name, want, have in zip(output_names(agent), expected, got):
        want = want.numpy()
        exact = name == "action" and want.dtype.kind != "f"  # indices; a Box action is a mean
        same = np.array_equal(want, have) if exact else np.allclose(have, want, TOLERANCE, TOLERANCE)
        if not same:
            raise ExportError(f"{_what(agent)}: the ONNX graph's {name} differs from the torch model's by up to "
                              f"{np.abs(have.astype(np.float64) - want).max():.3g}: not written")


def export(agent, path: Path, overwrite: bool = False, source: str = "") -> None:
    """Writes the checked graph to `path` atomically; without overwrite, never over a file (FileExistsError)."""
    import onnx
    proto = to_onnx(agent, source)
    check_against_torch(agent, proto)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomically(Path(path), lambda tmp: onnx.save(proto, str(tmp)), replace=overwrite)


def parser() -> ArgumentParser:
    parser = ArgumentParser(description="Write a trained agent as one ONNX graph (docs/export.md): observation, "
                            "recurrent state and episode start in; action distribution, deterministic action, "
                            "value and next state out; any batch size.", epilog="Exit codes: 0 written, 1 the file "
                            "could not be written, 2 refused (bad flag, checkpoint or target, or a model ONNX "
                            f"cannot express), {script.STOPPED}.")
    parser.add_argument("--model", metavar="PATH", required=True, help="a checkpoint written by train.py")
    parser.add_argument("--out", metavar="PATH", type=Path, required=True, help="the .onnx file to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    return parser


def main(argv=None) -> int:
    from agent import Agent

    def start():
        args = parser().parse_args(argv)
        require("onnx", "onnxruntime", "onnxscript")  # torch.onnx's exporter needs onnxscript
        check_output("--out", [args.out], args.overwrite, (".onnx",), "agent.onnx")
        return args, Agent.load(args.model)

    def work(started) -> int:
        args, agent = started
        try:
            export(agent, args.out, args.overwrite, Path(args.model).name)
        except FileExistsError:
            raise ConfigError(f"{args.out} appeared meanwhile: pass --overwrite to replace it") from None
        except OSError as error:
            raise script.Failed(f"could not write {args.out} ({reason(error)})") from None
        print(f"wrote {args.out} ({args.out.stat().st_size / 2 ** 20:.1f} MiB, state size {agent.model.state_size})")
        return 0
    # the exporter may swallow or rewrap a KeyboardInterrupt; nothing is written before the atomic write
    return script.life(start, work, (SpaceError, ExportError),
                       on_first=lambda number: stopping.leave(number, "during the export"))


if __name__ == "__main__":
    script.run(main)
