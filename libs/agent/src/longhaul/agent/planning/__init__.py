"""Plans as data, shared by the planner and the gateway: the plan schema and its graph and
quality checks (a plan a person edits during review passes exactly the checks a model's plan
does), the rule-based decomposer and the rule-based complexity estimate that routes a run.
Pure: no NATS, no service."""
