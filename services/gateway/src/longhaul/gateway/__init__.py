"""longhaul.gateway service."""
