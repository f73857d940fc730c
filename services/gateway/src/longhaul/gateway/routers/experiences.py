"""``/api/experiences``: the caller's experience records — list, read, edit, delete, and the
markdown file (export / import) a person reads, edits and carries between deployments.

Every route reads and writes below the caller's own owner id (``longhaul.core.experiences``):
another key's ids are simply not there, so a guessed id answers 404 and an import of someone
else's file makes the caller's own copies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Path, Query, Request, Response
from longhaul.core.experiences import ExperienceExists, ExperienceStore
from longhaul.domain import experiences as exp
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.common import Body, Counter
from pydantic import BaseModel, Field, StringConstraints
from starlette.convertors import StringConvertor, register_url_convertor

router = APIRouter(prefix="/api", tags=["experiences"], responses=ERROR_RESPONSES)


class ExperienceIdConvertor(StringConvertor):
    """Only an experience id matches ``{experience_id}``: ``export`` and ``import`` stay
    their own routes for every method (405 for the wrong one, not a malformed id)."""

    regex = exp.ID_PATTERN.strip("^$")


register_url_convertor("experience_id", ExperienceIdConvertor())
ONE_PATH = "/experiences/{experience_id:experience_id}"

MARKDOWN = "text/markdown; charset=utf-8"
MAX_IMPORT = 1000
"""Experiences one import may carry: each is one KV write inside the request's deadline, so a
body of thousands of tiny blocks would time out half-written instead of being refused."""
ExperienceId = Annotated[str, Path(pattern=exp.ID_PATTERN, description="ex_ + letters/digits")]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Category = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
Content = Annotated[
    str,
    StringConstraints(pattern=exp.NON_BLANK, max_length=exp.MAX_CONTENT),
    Field(description="the rule, with its condition and evidence"),
]


class TagsBody(Body):
    state: list[Tag] = Field(default_factory=list, max_length=exp.MAX_TAGS)
    intent: list[Tag] = Field(default_factory=list, max_length=exp.MAX_TAGS)


class MetricsBody(Body):
    helpful: Counter = 0
    harmful: Counter = 0


class ExperienceView(BaseModel):
    id: str
    trace_id: str | None
    category: str
    tags: dict[str, list[str]]
    metrics: dict[str, int]
    content: str
    created_at: datetime


class ExperienceList(BaseModel):
    experiences: list[ExperienceView]
    next_cursor: str | None = None


class CreateExperience(Body):
    category: Category
    content: Content
    tags: TagsBody = Field(default_factory=TagsBody)


class PatchExperience(Body):
    category: Category | None = None
    content: Content | None = None
    tags: TagsBody | None = None
    metrics: MetricsBody | None = None


class Imported(BaseModel):
    imported: int
    ids: list[str]


def _view(item: exp.Experience) -> ExperienceView:
    return ExperienceView.model_validate(
        msgspec.to_builtins(item) | {"created_at": item.created_at}
    )


def _store(runtime: Runtime) -> ExperienceStore:
    return runtime.service.experiences


def _invalid(exc: exp.ExperienceError, code: str = "invalid_experience") -> ApiError:
    return ApiError(422, code, str(exc))


async def _owned(runtime: Runtime, principal: Principal) -> list[exp.Experience]:
    async with runtime.nats_call():
        items = await _store(runtime).list(principal.owner)
    items.sort(key=lambda item: (item.created_at, item.id), reverse=True)
    return items


def _matches(item: exp.Experience, tag: str | None, category: str | None, q: str | None) -> bool:
    if category is not None and item.category != category:
        return False
    if tag is not None and exp.normalise_tag(tag) not in (*item.tags.intent, *item.tags.state):
        return False
    return q is None or q.lower() in item.content.lower()


@router.get("/experiences", response_model=ExperienceList, summary="Your experiences, newest first")
async def list_experiences(
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    tag: Annotated[str | None, Query(max_length=64, description="an intent or state tag")] = None,
    category: Annotated[str | None, Query(max_length=64)] = None,
    q: Annotated[str | None, Query(max_length=200, description="text in the content")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,9}$")] = None,
) -> ExperienceList:
    items = [item for item in await _owned(runtime, principal) if _matches(item, tag, category, q)]
    start = int(cursor or 0)
    page = items[start : start + limit]
    more = start + limit < len(items)
    return ExperienceList(
        experiences=[_view(item) for item in page],
        next_cursor=str(start + limit) if more else None,
    )


@router.post("/experiences", status_code=201, summary="Record an experience by hand")
async def create_experience(
    body: CreateExperience, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> ExperienceView:
    try:
        item = exp.make(
            category=body.category,
            content=body.content,
            categories=runtime.config.memory.categories,
            state=body.tags.state,
            intent=body.tags.intent,
        )
    except exp.ExperienceError as exc:
        raise _invalid(exc) from exc
    async with runtime.nats_call():
        try:
            await _store(runtime).create(principal.owner, item)
        except ExperienceExists as exc:  # a fresh ULID: practically never
            raise ApiError(409, "conflict", f"experience {item.id} exists") from exc
    return _view(item)


@router.get(
    "/experiences/export",
    summary="Your experiences as one markdown file (front matter + content per experience)",
    response_class=Response,
    responses={
        200: {"content": {"text/markdown": {"schema": {"type": "string"}}}},
        **ERROR_RESPONSES,
    },
)
async def export_experiences(runtime: CurrentRuntime, principal: CurrentPrincipal) -> Response:
    items = await _owned(runtime, principal)
    items.reverse()  # the file reads oldest first
    return Response(
        exp.to_markdown(items),
        media_type=MARKDOWN,
        headers={"Content-Disposition": 'attachment; filename="experiences.md"'},
    )


_IMPORT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"text/markdown": {"schema": {"type": "string"}}},
    }
}


@router.post(
    "/experiences/import",
    response_model=Imported,
    summary="Read an exported markdown file back (same ids: replaced; new ids: added; "
    f"at most {MAX_IMPORT} experiences; a file with an error imports none)",
    openapi_extra=_IMPORT_BODY,
)
async def import_experiences(
    request: Request, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Imported:
    raw = await request.body()
    if not raw:
        raise ApiError(422, "invalid_experience_file", "the request has no body (a markdown file)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(422, "invalid_experience_file", "the file is not UTF-8") from exc
    try:
        items = exp.from_markdown(text, runtime.config.memory.categories)
    except exp.ExperienceError as exc:
        raise _invalid(exc, "invalid_experience_file") from exc
    if len(items) > MAX_IMPORT:
        raise ApiError(
            413,
            "too_many_experiences",
            f"the file holds {len(items)} experiences; import at most {MAX_IMPORT} at a time",
            {"max_experiences": MAX_IMPORT},
        )
    async with runtime.nats_call():
        await _store(runtime).record(principal.owner, items)
    return Imported(imported=len(items), ids=[item.id for item in items])


@router.get(ONE_PATH, response_model=ExperienceView, summary="One experience")
async def get_experience(
    experience_id: ExperienceId, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> ExperienceView:
    async with runtime.nats_call():
        item = await _store(runtime).get(principal.owner, experience_id)
    if item is None:
        raise ApiError(404, "not_found", f"no experience {experience_id}")
    return _view(item)


@router.patch(ONE_PATH, summary="Edit an experience (category, content, tags, metrics)")
async def patch_experience(
    experience_id: ExperienceId,
    body: PatchExperience,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
) -> ExperienceView:
    categories = runtime.config.memory.categories

    def change(item: exp.Experience) -> exp.Experience:
        fields: dict[str, Any] = {}
        if body.category is not None:
            fields["category"] = body.category
        if body.content is not None:
            fields["content"] = body.content
        if body.tags is not None:
            fields["tags"] = exp.Tags(state=body.tags.state, intent=body.tags.intent)
        if body.metrics is not None:
            fields["metrics"] = exp.Metrics(
                helpful=body.metrics.helpful, harmful=body.metrics.harmful
            )
        return exp.checked(msgspec.structs.replace(item, **fields), categories)

    async with runtime.nats_call():
        try:
            item = await _store(runtime).update(principal.owner, experience_id, change)
        except exp.ExperienceError as exc:
            raise _invalid(exc) from exc
    if item is None:
        raise ApiError(404, "not_found", f"no experience {experience_id}")
    return _view(item)


@router.delete(ONE_PATH, status_code=204, summary="Delete an experience")
async def delete_experience(
    experience_id: ExperienceId, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Response:
    async with runtime.nats_call():
        deleted = await _store(runtime).delete(principal.owner, experience_id)
    if not deleted:
        raise ApiError(404, "not_found", f"no experience {experience_id}")
    return Response(status_code=204)
