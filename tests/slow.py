"""Which tests are ``slow``: the process-level ones (services, the CLI, a browser, kill -9)
and the few in-process ones that take seconds. ``pytest -m "not slow"`` is the inner loop
(unit tests, decision logic over the in-memory store, and the quick real-NATS integration
tests); ``make test`` runs everything. One list here rather than marks spread over files, so
the inner loop's budget is kept in one place."""

from __future__ import annotations

SLOW_PATHS = (
    "tests/chaos/",  # kill -9 of service processes
    "tests/e2e/",  # headless Chromium
    "tests/integration/cli/",  # `longhaul` subprocesses over a full stack
    "tests/integration/gateway/test_openapi.py",  # schemathesis over every route
    "tests/integration/planner/test_with_executor.py",  # planner + executor processes
    "tests/integration/planner/test_resume.py",  # planner killed mid-task
    "tests/integration/verifier/test_verifier.py",  # verifier service and command checks
    "tests/integration/executor/test_shutdown.py",  # SIGTERM to an executor process
    "tests/integration/executor/test_leases.py",  # waits out lease TTLs
    "tests/integration/gateway/test_streams.py",  # SSE/WebSocket heartbeats and reconnects
    "tests/integration/test_provider_e2e.py",  # provider retries with Retry-After
    "tests/real_model/",  # a real llama.cpp server generating on the CPU
    "tests/integration/gateway/test_approval.py",  # executor processes, one killed -9
    "tests/integration/gateway/test_mcp_tools.py",  # MCP server processes, one killed -9
    "tests/integration/gateway/test_mcp_keys.py",  # sandboxed MCP servers per key, reaped
    "tests/unit/agent/test_mcp_keys.py",  # sandboxed MCP server processes, one reaped
    "tests/cluster/",  # three nats-server nodes, two killed -9 in turn
    "tests/integration/test_pip_install.py",  # every wheel built, pip-installed, `longhaul up`
    "tests/integration/gateway/test_mcp_conformance.py",  # the MCP suite on Node, from npm
    "tests/integration/gateway/test_a2a_conformance.py",  # a2a-lint and a2a-sdk 0.3 in a venv
)

SLOW_TESTS = frozenset(
    {
        "tests/unit/agent/test_sandbox_seccomp.py::"
        "test_sandboxed_bash_works_under_the_deployment_profile_and_the_profile_holds",
        "tests/integration/core/test_store.py::test_replay_10000_events",
        "tests/integration/gateway/test_ag_ui.py::"
        "test_the_official_ag_ui_client_runs_answers_and_continues_a_thread",  # Node, from npm
        "tests/integration/gateway/test_mcp_server.py::"
        "test_the_stdio_bridge_serves_the_same_tools_per_key",  # `longhaul mcp` subprocesses
        "tests/integration/gateway/test_mcp_server.py::"
        "test_the_stdio_bridge_advertises_resources_and_its_version",  # a `longhaul mcp`
        "tests/integration/gateway/test_mcp_server.py::"
        "test_the_stdio_bridge_refused_by_the_gateway_answers_errors_and_keeps_running",
        "tests/integration/remote/test_remote_agents.py::"
        "test_a_killed_executor_is_replaced_and_the_remote_wait_resumes",
        "tests/integration/executor/test_waits.py::"
        "test_a_reply_that_arrives_while_a_dead_executor_holds_the_lease_is_not_lost",
        "tests/integration/executor/test_turns.py::test_a_turn_that_loses_its_lease_is_cancelled_at_once",
        "tests/integration/executor/test_subtraces.py::test_a_parent_with_five_children_across_two_executors",
        "tests/integration/executor/test_sweeper.py::test_an_orphaned_trace_is_finished_by_the_sweeper",
        "tests/integration/gateway/test_health.py::test_readyz_is_503_when_nats_goes_away",
        "tests/unit/agent/test_engine_basics.py::test_the_engine_and_the_providers_never_import_nats",
        "tests/unit/agent/test_bash.py::test_the_command_tree_dies_with_its_executor",
        "tests/integration/test_telemetry.py::"
        "test_a_turn_resumed_after_kill_9_continues_the_original_trace",
        "tests/integration/test_telemetry.py::"
        "test_a_subprocess_executor_with_the_sdk_disabled_exports_nothing",
        "tests/integration/gateway/test_delete.py::"
        "test_delete_erases_the_family_everywhere_and_nothing_of_another_key",
        "tests/integration/gateway/test_retention.py::test_retention_deletes_only_what_expired",
        # `longhaul` subprocesses, kill -9, cgroup-bounded process trees: seconds each
        "tests/integration/planner/test_review.py::"
        "test_the_cli_shows_a_plan_for_review_and_answers_it",
        "tests/integration/planner/test_review.py::"
        "test_longhaul_run_routes_a_comparison_to_a_team_and_follows_it",
        "tests/integration/planner/test_review.py::"
        "test_a_reviewed_plan_survives_a_planner_restart_and_runs_as_edited",
        "tests/integration/planner/test_task_limits.py::"
        "test_checkpoints_are_listed_and_cleared_and_a_resume_then_reads_the_log",
        "tests/integration/gateway/test_waiting_inbox.py::"
        "test_the_inbox_lists_each_keys_waits_and_answers_them_in_place",
        "tests/integration/gateway/test_waiting_inbox.py::"
        "test_a_deadline_s_default_action_is_taken_after_an_executor_kill_9",
        "tests/integration/gateway/test_backup.py::test_backup_wipe_restore_resumes_a_waiting_trace",
        "tests/integration/gateway/test_spend_limits.py::"
        "test_a_key_at_its_day_limit_asks_and_the_operator_raises_it",  # `longhaul` subprocesses
        "tests/integration/gateway/test_notifications.py::"
        "test_a_delivery_survives_a_kill_of_the_notifier_between_event_and_delivery",
        "tests/integration/gateway/test_storage_full.py::"
        "test_a_full_stream_refuses_new_runs_stops_running_ones_and_loses_nothing",
        "tests/unit/agent/test_file_tool_attacks.py::"
        "test_a_file_larger_than_memory_is_read_in_bounded_memory",
        "tests/unit/agent/test_cgroups.py::test_a_root_services_run_is_bounded_in_processes",
        "tests/unit/agent/test_cgroups.py::test_the_whole_tree_shares_one_memory_limit",
        # executor or gateway processes stopped, killed or restarted: 3-8 s each
        "tests/integration/remote/test_a2a_agents.py::test_a_killed_executor_resumes_both_a2a_waits",
        "tests/integration/gateway/test_health.py::"
        "test_an_executor_present_again_after_an_outage_longer_than_its_presence_lease",
        "tests/integration/gateway/test_health.py::test_readyz_waits_for_an_executor_consuming",
        "tests/integration/core/test_nats_auth.py::"
        "test_an_executor_writes_an_imported_log_only_under_the_import_writer_s_user",
        "tests/integration/gateway/test_notifications.py::"
        "test_a_failing_schedule_is_told_once_then_counted_then_paused_across_two_gateways",
        "tests/integration/gateway/test_revoked_key.py::"
        "test_a_key_removed_from_the_config_stops_at_the_restart",
        "tests/integration/gateway/test_schedules.py::"
        "test_overlap_skip_passes_ticks_by_and_queue_waits_while_a_run_is_going",
        "tests/integration/test_telemetry.py::"
        "test_a_subprocess_executor_exports_over_otlp_http_to_a_loopback_receiver",
        "tests/unit/agent/test_bash.py::test_timeout_kills_the_process_group",  # a real timeout
        "tests/unit/agent/test_file_tool_attacks.py::"
        "test_a_racing_symlink_swap_never_leaks_or_escapes",  # races for seconds on purpose
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
