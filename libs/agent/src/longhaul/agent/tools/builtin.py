"""The built-in tool set, and the opt-in tools presets name (``view_image``, the browser)."""

from __future__ import annotations

from longhaul.agent.tools.browser import BROWSER_TOOLS
from longhaul.agent.tools.experience import get_experience
from longhaul.agent.tools.files import edit, glob, grep, read, write
from longhaul.agent.tools.goal import goal
from longhaul.agent.tools.human import ask_human
from longhaul.agent.tools.messaging import check_messages, send_message
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.shell import bash
from longhaul.agent.tools.skill import skill
from longhaul.agent.tools.subtraces import agent, evaluate
from longhaul.agent.tools.view_image import view_image
from longhaul.agent.tools.web import webfetch
from longhaul.agent.tools.workspace_read import workspace_read

BUILTIN_TOOLS = (
    read,
    write,
    edit,
    glob,
    grep,
    bash,
    goal,
    agent,
    evaluate,
    ask_human,
    webfetch,
    skill,
    workspace_read,
    check_messages,
    send_message,
    get_experience,
)


OPT_IN_TOOLS = (view_image, *BROWSER_TOOLS)
"""Registered by executors but denied by the ``default`` preset: a text-only model cannot take
an image, and a browser per turn is heavy. The ``browser`` preset offers them."""


def builtin_tools() -> ToolRegistry:
    """A fresh registry of every built-in tool (callers may register their own on top)."""
    return ToolRegistry(BUILTIN_TOOLS)
