"""Thresholds: each rule's defaults, overridden by a TOML file.

The file has one table per rule id, with the thresholds to change, and an
optional ``disabled`` list of rule ids::

    disabled = ["netpoll.long-tail"]

    ["sched.latency"]
    p99_ns = 2_000_000

``gmpscope diagnose --config FILE`` reads it; the server reads the file named
by ``GMPSCOPE_DIAGNOSE_CONFIG``. Unknown rules or thresholds, or values of
the wrong type, are errors (a typo must not silently keep a default).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_VAR = "GMPSCOPE_DIAGNOSE_CONFIG"


class ConfigError(ValueError):
    """A config file that cannot be used."""


@dataclass(frozen=True)
class DiagnoseConfig:
    """Per-rule threshold overrides and disabled rules."""

    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()
    source: str | None = None

    def for_rule(self, rule_id: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
        cfg = dict(defaults)
        cfg.update(self.overrides.get(rule_id, {}))
        return cfg


def _check_value(rule: str, key: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool) or isinstance(value, bool):
        raise ConfigError(f"[{rule}] {key}: booleans are not thresholds")
    if isinstance(default, (int, float)):
        if not isinstance(value, (int, float)):
            raise ConfigError(f"[{rule}] {key} must be a number, not {value!r}")
        if value < 0:
            raise ConfigError(f"[{rule}] {key} must not be negative")
        return value
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"[{rule}] {key} must be a list of strings")
        return list(value)
    raise ConfigError(f"[{rule}] {key}: unsupported value {value!r}")  # pragma: no cover


def parse_config(data: Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]],
                 source: str | None = None) -> DiagnoseConfig:
    """Validate a parsed TOML document against the rules' defaults."""
    overrides: dict[str, dict[str, Any]] = {}
    disabled: set[str] = set()
    for key, value in data.items():
        if key == "disabled":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError("disabled must be a list of rule ids")
            unknown = sorted(set(value) - set(defaults))
            if unknown:
                raise ConfigError(f"disabled: unknown rule(s) {', '.join(unknown)}")
            disabled.update(value)
            continue
        if key not in defaults:
            raise ConfigError(f"unknown rule [{key}]; rules: {', '.join(sorted(defaults))}")
        if not isinstance(value, dict):
            raise ConfigError(f"[{key}] must be a table of thresholds")
        rule_defaults = defaults[key]
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k not in rule_defaults:
                raise ConfigError(f"[{key}] has no threshold {k!r}; it has "
                                  f"{', '.join(sorted(rule_defaults))}")
            out[k] = _check_value(key, k, rule_defaults[k], v)
        overrides[key] = out
    return DiagnoseConfig(overrides=overrides, disabled=frozenset(disabled), source=source)


def load_config(path: Path | str | None, defaults: Mapping[str, Mapping[str, Any]]
                ) -> DiagnoseConfig:
    """The config in ``path`` (TOML), or the defaults when None."""
    if path is None:
        return DiagnoseConfig()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read {p}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    try:
        return parse_config(data, defaults, source=str(p))
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None


def config_from_env(defaults: Mapping[str, Mapping[str, Any]],
                    env: Mapping[str, str] | None = None) -> DiagnoseConfig:
    """The config named by $GMPSCOPE_DIAGNOSE_CONFIG (the server's), else defaults."""
    env = os.environ if env is None else env
    return load_config(env.get(ENV_VAR) or None, defaults)
