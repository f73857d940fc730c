"""longhaul.planner service."""
