"""`longhaul up`'s banner names the model really in use (``make run``: scripted:demo)."""

from __future__ import annotations

from pathlib import Path

from longhaul.cli.up import banner
from longhaul.core.config import LonghaulConfig
from longhaul.domain.config import ModelsConfig
from rich.console import Console


def rendered(model: str) -> str:
    config = LonghaulConfig(models=ModelsConfig(default=model))
    panel = banner(
        config,
        gateway_url="http://127.0.0.1:8080",
        nats_url="nats://127.0.0.1:4222",
        embedded=True,
        data_dir=Path(".longhaul"),
        executors=1,
        work_dir=Path(".longhaul/work"),
        ready=True,
    )
    console = Console(width=200, record=True)
    console.print(panel)
    return console.export_text()


def test_the_banner_names_the_demo_model_when_it_is_the_one_in_use() -> None:
    text = rendered("scripted:demo")
    assert "offline scripted model scripted:demo" in text
    assert "scripted:auto" not in text


def test_the_banner_names_scripted_auto_when_it_is_the_one_in_use() -> None:
    text = rendered("scripted:auto")
    assert "offline scripted model scripted:auto" in text
