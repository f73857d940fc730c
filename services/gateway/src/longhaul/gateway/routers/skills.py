"""``/api/skills``: the skills a trace can be given (``skills`` of ``POST /api/traces``, of the
``agent`` tool, or a preset's list): the built-ins and the project's ``memory.skills_dir``,
which overrides a built-in of the same name. Read from disk on each call, as the executor
reads them at start-up."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from longhaul.agent.skills import SkillIndex, skill_dirs
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from pydantic import BaseModel

router = APIRouter(prefix="/api", tags=["skills"], responses=ERROR_RESPONSES)


class SkillView(BaseModel):
    name: str
    description: str
    source: Literal["builtin", "project"]


class Skills(BaseModel):
    skills: list[SkillView]


@router.get("/skills", response_model=Skills, summary="The skills traces can load")
async def list_skills(runtime: CurrentRuntime, principal: CurrentPrincipal) -> Skills:
    index = SkillIndex.load(skill_dirs(runtime.config.memory.skills_dir))
    return Skills(
        skills=[
            SkillView(
                name=skill.name,
                description=skill.description,
                source="builtin" if skill.builtin else "project",
            )
            for skill in index.all()
        ]
    )
