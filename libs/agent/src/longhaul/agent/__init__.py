"""longhaul.agent."""
