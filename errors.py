"""The error a user can fix: a bad config key, file or argument. The command line refuses it in one line, exit 2."""


class ConfigError(ValueError):
    """A user-fixable problem with the config; its message is one line."""
