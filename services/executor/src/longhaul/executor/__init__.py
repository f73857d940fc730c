"""longhaul.executor service."""
