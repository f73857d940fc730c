"""longhaul.cli."""
