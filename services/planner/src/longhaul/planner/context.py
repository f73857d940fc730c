"""What a step trace is told: the task goal, its phase, and its dependencies' results.

Dependencies appear as a summary of at most 500 characters plus their workspace key; the full
text stays in the workspace and the step agent fetches it with ``workspace_read`` only if it
needs it.
"""

from __future__ import annotations

from longhaul.domain.events import PhaseSpec
from longhaul.domain.state import TaskState


def phase_brief(task: TaskState, spec: PhaseSpec) -> str:
    parts = [
        "You are carrying out one phase of a larger task.",
        f"Task goal:\n{task.goal}",
        f"Your phase ({spec.id}): {spec.name}\n{spec.description}",
    ]
    if spec.criteria:
        parts.append("Acceptance criteria:\n" + "\n".join(f"- {c}" for c in spec.criteria))
    if spec.depends_on:
        lines = [
            "Results of the phases yours builds on (summaries; read the full text with the "
            "workspace_read tool and the key when you need more than the summary):"
        ]
        for dep in spec.depends_on:
            state = task.phases.get(dep)
            if state is None:
                continue
            lines.append(
                f"### {dep}: {state.spec.name}\nkey: {state.output_ref}\n"
                f"summary: {state.summary or '(empty)'}"
            )
        parts.append("\n\n".join(lines))
    parts.append("Finish with the complete result of your phase as your final answer.")
    return "\n\n".join(parts)
