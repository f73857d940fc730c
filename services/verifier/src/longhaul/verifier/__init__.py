"""longhaul.verifier service."""
