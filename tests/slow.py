"""Which tests are ``slow``: the process-level ones (services, the CLI, a browser, kill -9),
the HTTP surfaces (a gateway app per test: FastAPI builds each app's routes on first use, about
0.2 s of CPU), and the few in-process ones that take seconds. ``pytest -m "not slow"`` is the
inner loop, about 35 s on 2 cores: unit tests, and the services' decisions over a real
nats-server in process (store, executor, planner, verifier); ``make test`` runs everything. One
list here rather than marks spread over files, so the inner loop's budget is kept in one place."""

from __future__ import annotations

SLOW_PATHS = (
    "tests/chaos/",  # kill -9 of service processes
    "tests/e2e/",  # headless Chromium
    "tests/cluster/",  # three nats-server nodes, two killed -9 in turn
    "tests/real_model/",  # a real llama.cpp server generating on the CPU
    "tests/integration/cli/",  # `longhaul` subprocesses over a full stack
    "tests/integration/gateway/",  # the HTTP API: a gateway app (often an executor) per test
    "tests/integration/client/",  # the Python client against a gateway per test
    "tests/integration/remote/",  # remote agents: two gateways and executors per test
    "tests/integration/planner/test_with_executor.py",  # planner + executor processes
    "tests/integration/planner/test_resume.py",  # planner killed mid-task
    "tests/integration/verifier/test_verifier.py",  # verifier service and command checks
    "tests/integration/executor/test_shutdown.py",  # SIGTERM to an executor process
    "tests/integration/executor/test_leases.py",  # waits out lease TTLs
    "tests/integration/test_provider_e2e.py",  # provider retries with Retry-After
    "tests/integration/test_pip_install.py",  # every wheel built, pip-installed, `longhaul up`
    "tests/unit/agent/test_browser.py",  # headless Chromium
    "tests/unit/agent/test_mcp_keys.py",  # sandboxed MCP server processes, one reaped
    "tests/unit/test_start_imports.py",  # a fresh interpreter per start path
)

SLOW_TESTS = frozenset(
    {
        # sandboxed process trees, cgroups, real timeouts and races: seconds each
        "tests/unit/agent/test_sandbox_seccomp.py::"
        "test_sandboxed_bash_works_under_the_deployment_profile_and_the_profile_holds",
        "tests/unit/agent/test_bash.py::test_the_command_tree_dies_with_its_executor",
        "tests/unit/agent/test_bash.py::test_timeout_kills_the_process_group",
        "tests/unit/agent/test_cgroups.py::test_a_root_services_run_is_bounded_in_processes",
        "tests/unit/agent/test_cgroups.py::test_the_whole_tree_shares_one_memory_limit",
        "tests/unit/agent/test_file_tool_attacks.py::"
        "test_a_file_larger_than_memory_is_read_in_bounded_memory",
        "tests/unit/agent/test_file_tool_attacks.py::"
        "test_a_racing_symlink_swap_never_leaks_or_escapes",  # races for seconds on purpose
        "tests/unit/agent/test_engine_basics.py::test_the_engine_and_the_providers_never_import_nats",
        "tests/integration/core/test_store.py::test_replay_10000_events",
        # executor, planner or CLI processes started, killed or restarted: 3-8 s each
        "tests/integration/core/test_nats_auth.py::"
        "test_an_executor_writes_an_imported_log_only_under_the_import_writer_s_user",
        "tests/integration/executor/test_waits.py::"
        "test_a_reply_that_arrives_while_a_dead_executor_holds_the_lease_is_not_lost",
        "tests/integration/executor/test_turns.py::test_a_turn_that_loses_its_lease_is_cancelled_at_once",
        "tests/integration/executor/test_subtraces.py::test_a_parent_with_five_children_across_two_executors",
        "tests/integration/executor/test_sweeper.py::test_an_orphaned_trace_is_finished_by_the_sweeper",
        "tests/integration/planner/test_review.py::"
        "test_the_cli_shows_a_plan_for_review_and_answers_it",
        "tests/integration/planner/test_review.py::"
        "test_longhaul_run_routes_a_comparison_to_a_team_and_follows_it",
        "tests/integration/planner/test_review.py::"
        "test_a_reviewed_plan_survives_a_planner_restart_and_runs_as_edited",
        "tests/integration/planner/test_task_limits.py::"
        "test_checkpoints_are_listed_and_cleared_and_a_resume_then_reads_the_log",
        "tests/integration/test_telemetry.py::"
        "test_a_turn_resumed_after_kill_9_continues_the_original_trace",
        "tests/integration/test_telemetry.py::"
        "test_a_subprocess_executor_with_the_sdk_disabled_exports_nothing",
        "tests/integration/test_telemetry.py::"
        "test_a_subprocess_executor_exports_over_otlp_http_to_a_loopback_receiver",
    }
)


def is_slow(nodeid: str) -> bool:
    return nodeid.startswith(SLOW_PATHS) or nodeid.split("[", 1)[0] in SLOW_TESTS


HEAVIEST_FILES = (
    "tests/real_model/test_real_stack.py",
    "tests/integration/cli/test_eval.py",
    "tests/integration/cli/test_commands.py",
    "tests/chaos/test_chaos_suite.py",
    "tests/integration/gateway/test_openapi.py",
    "tests/e2e/test_viewer.py",
    "tests/integration/test_pip_install.py",
    "tests/integration/cli/test_up.py",
    "tests/cluster/test_cluster.py",
    "tests/integration/planner/test_review.py",
    "tests/real_model/test_local_up.py",
    "tests/real_model/test_local_provider.py",
    "tests/chaos/test_schedule_ticks.py",
    "tests/chaos/test_executor_crash.py",
    "tests/chaos/test_kill_at_effect.py",
    "tests/chaos/test_provider_down.py",
    "tests/integration/cli/test_canary.py",
    "tests/integration/cli/test_up_tracing.py",
    "tests/integration/gateway/test_waiting_inbox.py",
    "tests/integration/cli/test_example_tools.py",
    "tests/integration/planner/test_task_limits.py",
    "tests/real_model/test_prompt_cache.py",
)
"""The files that take longest under ``make test`` (``--dist loadfile``: a file is one unit
of work), heaviest first; ``make durations`` prints the current ranking. xdist's default queue
puts the files with fewest tests last, which left one-test files of two minutes (pip install,
``longhaul up`` on a local model) for the end while the other worker sat idle: started first,
the long files overlap and the many short ones fill the gaps."""


def heaviest_first(nodeids: list[str]) -> list[int]:
    """The order (indices into ``nodeids``) that runs the files of ``HEAVIEST_FILES`` first, in
    its order, and every other test after them in collection order."""
    rank = {path: index for index, path in enumerate(HEAVIEST_FILES)}
    last = len(HEAVIEST_FILES)
    return sorted(range(len(nodeids)), key=lambda i: rank.get(nodeids[i].split("::", 1)[0], last))
