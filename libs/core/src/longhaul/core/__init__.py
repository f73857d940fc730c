"""longhaul.core."""
