"""An executor registers the opt-in tools (``view_image``, the browser) as built-ins; only
the ``browser`` preset offers them."""

from __future__ import annotations

from longhaul.agent.presets import PresetCatalog
from longhaul.domain import events as ev
from longhaul.executor.tools import BUILTIN_NAMES, load_tools

OPT_IN = {
    "view_image",
    "browser_navigate",
    "browser_snapshot",
    "browser_click",
    "browser_type",
    "browser_screenshot",
}


def test_registered_as_builtins_and_offered_only_by_the_browser_preset() -> None:
    registry = load_tools([])
    assert OPT_IN <= set(registry.names()) and OPT_IN <= BUILTIN_NAMES
    presets = PresetCatalog({"mine": {"extends": "default"}})
    for name in ("default", "mine", "explore", "analyst"):
        offered = presets.get(name).select_tools(registry, ev.TraceConfig())
        assert not OPT_IN & set(offered.names()), name
    browser = presets.get("browser").select_tools(registry, ev.TraceConfig())
    assert OPT_IN <= set(browser.names()) and "bash" in browser.names()
