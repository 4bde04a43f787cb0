"""The errors a run can end in, each with a one-line message: a problem the user can fix (the scripts refuse it,
exit code 2) or one the run met (exit code 1). Every module takes them from here."""


class ConfigError(ValueError):
    """A user-fixable problem with the config; its message is one line."""


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used, read or written; the message is one line."""


class NonFiniteError(RuntimeError):
    """A loss, gradient or parameter that is NaN or infinite: the update stops, nothing is saved."""


class StrayParameterError(RuntimeError):
    """The loss reaches a tensor that is not the model's parameter: no step would train it, no checkpoint hold it."""


class WorkerError(RuntimeError):
    """An environment failed in reset or step (the message names it, with its traceback), or a worker died."""
