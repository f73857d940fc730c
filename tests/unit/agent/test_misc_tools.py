"""skill, workspace_read and attachments."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent import (
    Attachment,
    SkillIndex,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    tool,
)
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.skills import BUILTIN_SKILLS_DIR, skill_dirs
from longhaul.agent.tools.skill import skill
from longhaul.agent.tools.workspace_read import workspace_read
from longhaul.domain import events as ev

from tests.unit.agent.support import (
    MemorySink,
    MemoryWorkspace,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
    tool_context,
)


def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "deploy").mkdir(parents=True)
    (root / "review.md").write_text(
        "---\nname: code-review\ndescription: how to review a PR\n---\n# Review\nRead the diff."
    )
    (root / "deploy" / "SKILL.md").write_text("# Deploying safely\nSteps…")
    return root


def test_skill_index_reads_front_matter_and_folders(tmp_path: Path) -> None:
    index = SkillIndex.load([skills_dir(tmp_path), tmp_path / "missing"])
    assert index.names() == ["deploy", "code-review"]
    assert "- code-review: how to review a PR" in index.render()
    assert "- deploy: Deploying safely" in index.render()
    assert index.only(["deploy"]).names() == ["deploy"]


async def test_skill_tool_loads_the_body(tmp_path: Path) -> None:
    index = SkillIndex.load([skills_dir(tmp_path)])
    result = await skill.run(tool_context(tmp_path, skills=index), {"name": "code-review"})
    assert isinstance(result, ToolResult) and result.output == "# Review\nRead the diff."
    with pytest.raises(ToolError, match="available: deploy, code-review"):
        await skill.run(tool_context(tmp_path, skills=index), {"name": "nope"})


async def test_skills_are_listed_in_the_system_prompt(tmp_path: Path) -> None:
    index = SkillIndex.load([skills_dir(tmp_path)])
    model, script = scripted(answer("ok"))
    state = new_state()
    await make_engine(tmp_path, skills=index).run_turn(state, MemorySink(state), model=model)
    assert "- code-review: how to review a PR" in script.requests[0].system_stable


async def test_workspace_read(tmp_path: Path) -> None:
    workspace = MemoryWorkspace()
    workspace.data["task/t1/phase/p1/output"] = ("z" * 50).encode()
    state = new_state("go", trace_id="t_mine")
    state.task_id, state.parent_trace_id = "t1", "t_parent"
    ctx = tool_context(tmp_path, state=state, workspace=workspace)
    result = await workspace_read.run(ctx, {"key": "task/t1/phase/p1/output", "offset": 45})
    assert isinstance(result, ToolResult) and result.output == "zzzzz"
    for own in ("outputs/t_mine/c1", "outputs/t_parent/c1", "trace/t_mine/attachments/c/x"):
        workspace.data[own] = b"ours"
        read = await workspace_read.run(ctx, {"key": own})
        assert isinstance(read, ToolResult) and read.output == "ours"
    # The workspace is shared by every key: entries outside the trace's family read as missing.
    for foreign in (
        "outputs/t_other/c1",
        "uploads/t_other/abc",
        "task/t2/phase/p1/output",
        "task/t1",
        "images/k_other/abc",
        "quota/uploads/k_other",
        "outputs/t_mine/../../outputs/t_other/c1",
    ):
        workspace.data[foreign] = b"theirs"
        with pytest.raises(ToolError) as refused:
            await workspace_read.run(ctx, {"key": foreign})
        assert refused.value.code == "not_found", foreign
    with pytest.raises(ToolError) as missing:
        await workspace_read.run(ctx, {"key": "nope"})
    assert missing.value.code == "not_found"
    with pytest.raises(ToolError) as none:
        await workspace_read.run(tool_context(tmp_path), {"key": "x"})
    assert none.value.code == "not_available"


@tool
async def plot() -> ToolResult:
    """Draw a chart."""
    return ToolResult(
        output="drawn", attachments=(Attachment("chart.png", b"\x89PNG", "image/png"),)
    )


async def test_attachments_go_to_the_workspace(tmp_path: Path) -> None:
    workspace = MemoryWorkspace()
    model, _ = scripted(calls(call("plot", id="p1")), answer("ok"))
    state = new_state()
    sink = MemorySink(state)
    engine = make_engine(tmp_path, tools=ToolRegistry([plot]), workspace=workspace)
    await engine.run_turn(state, sink, model=model)
    key = "trace/t_test/attachments/p1/chart_png"
    attachments = {k: v for k, v in workspace.data.items() if not k.startswith("context/")}
    assert attachments == {key: b"\x89PNG"}
    [result] = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert str(result.content) == (
        f"drawn\n\nattachment chart.png (image/png, 4 bytes): read it with workspace_read key={key}"
    )


PAYMENTS: list[str] = []


@tool
async def pay(ctx: ToolContext, amount: int) -> str:
    """Pay once, however often the call is retried.

    Args:
        amount: cents.
    """
    PAYMENTS.append(ctx.idempotency_key)
    return "paid"


async def test_tool_context_carries_the_idempotency_key(tmp_path: Path) -> None:
    model, _ = scripted(calls(call("pay", {"amount": 5}, id="call_9")), answer("ok"))
    state = new_state()
    await make_engine(tmp_path, tools=ToolRegistry([pay])).run_turn(
        state, MemorySink(state), model=model
    )
    assert PAYMENTS == ["t_test:call_9"]


@pytest.mark.parametrize(
    ("trace_skills", "expected"),
    [
        (["deploy"], ["deploy"]),  # the trace's own list first
        ([], ["code-review"]),  # then the preset's
    ],
)
async def test_skills_follow_trace_then_preset_then_all(
    tmp_path: Path, trace_skills: list[str], expected: list[str]
) -> None:
    index = SkillIndex.load([skills_dir(tmp_path), BUILTIN_SKILLS_DIR])
    presets = PresetCatalog({"reviewer": {"skills": ["code-review"]}})
    engine = make_engine(tmp_path, skills=index, presets=presets, workspace=MemoryWorkspace())
    for preset, wanted in (("reviewer", expected), ("default", trace_skills or index.names())):
        model, script = scripted(answer("ok"))
        state = new_state(config=ev.TraceConfig(preset=preset, skills=trace_skills))
        await engine.run_turn(state, MemorySink(state), model=model)
        prompt = script.requests[0].system_stable
        listed = [line[2:].split(":")[0] for line in prompt.splitlines() if line.startswith("- ")]
        assert listed == wanted
        assert state.context is not None and state.context.skills == wanted


def test_builtin_skills_ship_and_a_project_skill_overrides_one(tmp_path: Path) -> None:
    builtin = SkillIndex.load(skill_dirs())
    assert {"planning", "research", "web"} <= set(builtin.names())
    assert all(skill.builtin for skill in builtin.all())
    assert "goal add" in (builtin.get("planning") or pytest.fail()).body()
    project = tmp_path / "project"
    project.mkdir()
    (project / "planning.md").write_text("# Our planning\nUse the tracker.")
    index = SkillIndex.load(skill_dirs(project))
    overridden = index.get("planning")
    assert overridden is not None and not overridden.builtin
    assert overridden.body() == "# Our planning\nUse the tracker."
    assert set(index.names()) == set(builtin.names())
