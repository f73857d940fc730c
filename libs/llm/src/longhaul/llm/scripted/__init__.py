"""The offline ``scripted:`` provider."""

from longhaul.llm.scripted.auto import auto_turn
from longhaul.llm.scripted.demo import demo_turn
from longhaul.llm.scripted.model import (
    EXHAUSTED,
    ScriptedModel,
    ScriptFn,
    Turn,
    TurnScript,
    load_script,
)
from longhaul.llm.scripted.schema_sample import sample_schema

__all__ = [
    "EXHAUSTED",
    "ScriptFn",
    "ScriptedModel",
    "Turn",
    "TurnScript",
    "auto_turn",
    "demo_turn",
    "load_script",
    "sample_schema",
]
