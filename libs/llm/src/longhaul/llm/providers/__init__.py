"""Wire formats of the remote providers (one :class:`~longhaul.llm.http_model.Codec` each)."""
