"""Automatic findings over one trace: each rule measures one classic problem
(blocking syscalls, scheduler latency, netpoller tails and leaks, goroutine
leaks, lock contention, GC pressure) and returns it with its evidence.
docs/diagnostics.md describes every rule and threshold."""

from ingest.diagnose.config import ConfigError, DiagnoseConfig, config_from_env, load_config
from ingest.diagnose.render import render_markdown, render_text
from ingest.diagnose.runner import RULES, diagnose, rule_defaults

__all__ = ["RULES", "ConfigError", "DiagnoseConfig", "config_from_env", "diagnose",
           "load_config", "render_markdown", "render_text", "rule_defaults"]
