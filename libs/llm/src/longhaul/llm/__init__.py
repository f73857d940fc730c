"""longhaul.llm."""
