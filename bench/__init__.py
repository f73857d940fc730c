"""Benchmarks (`make bench`); see docs/10-operations.md for what each measures."""

import os
import tempfile

# Benches write their scripted models under the temp dir: the only place services may read
# scripted:<file> models from (models.scripted_dir).
os.environ.setdefault("LONGHAUL_MODELS__SCRIPTED_DIR", tempfile.gettempdir())
