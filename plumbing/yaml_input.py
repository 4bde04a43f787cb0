"""yaml as the configs and overrides are read: PyYAML's safe loader, refusing a key given twice, a document that
expands past its size (aliases, merge keys) or nests too deep, and reading 3e-4 as the number it looks like."""
import itertools
import re

import yaml

from plumbing.errors import ConfigError

MAX_CONFIG_VALUES = 100_000  # values a config may expand to, aliases counted as often as they repeat
MAX_CONFIG_CHARACTERS = 2 ** 24  # a config file's text: 100,000 values take a few MB at most
MAX_CONFIG_DEPTH = 64  # nesting: a config nests 3 levels; PyYAML and copy recurse once per level


def read_yaml(text: str):
    """A yaml document as PyYAML's safe loader reads it, refusing a key given twice and require_small()'s."""
    try:
        tree = yaml.load(text, Loader=_ConfigLoader)
    except RecursionError:
        raise ConfigError(f"the yaml nests deeper than {MAX_CONFIG_DEPTH} levels") from None
    require_small(tree, "the yaml")
    return tree


def require_small(tree, what: str, limit: int = MAX_CONFIG_VALUES, depth: int = MAX_CONFIG_DEPTH) -> None:
    """Refuses a tree that expands past `limit` values (shared parts counted, walked once), nests or loops."""
    sizes: dict[int, int] = {}

    def size(node, level: int) -> int:
        if not isinstance(node, (dict, list, tuple)):
            return 1
        key = id(node)
        if key in sizes:
            if sizes[key] < 0:
                raise ConfigError(f"{what} holds itself (as a yaml alias inside its own anchor does)")
            return sizes[key]
        if level > depth:
            raise ConfigError(f"{what} nests deeper than {depth} levels")
        sizes[key] = -1  # being walked
        items = itertools.chain.from_iterable(node.items()) if isinstance(node, dict) else node
        total = 1
        for item in items:
            total += size(item, level + 1)
            if total > limit:
                raise ConfigError(f"{what} expands to more than {limit:,} values (parts repeated by reference, "
                                  "as yaml aliases and merge keys do: a 'billion laughs')")
        sizes[key] = total
        return total
    size(tree, 0)


class _ConfigLoader(yaml.SafeLoader):
    """yaml's safe loader, refusing a key written twice in a mapping and merge keys that expand one too far."""

    def compose_mapping_node(self, anchor):
        # as written, before merge keys: a merged key given again is an override (yaml's rule)
        node = super().compose_mapping_node(anchor)
        seen = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise ConfigError(f"config key '{key_node.value}' is given twice "
                                      f"(line {key_node.start_mark.line + 1})")
                seen.add(key)
        return node

    def flatten_mapping(self, node):
        super().flatten_mapping(node)
        if len(node.value) > MAX_CONFIG_VALUES:
            raise ConfigError(f"the yaml's merge keys expand a mapping to more than {MAX_CONFIG_VALUES:,} "
                              "entries (a 'billion laughs')")


# YAML 1.1 reads 3e-4 and 1.0e5 (no dot, or no exponent sign) as text: a number a researcher types is a number
_ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:float",
                                    re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))
