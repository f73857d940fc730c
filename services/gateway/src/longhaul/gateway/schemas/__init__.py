"""Pydantic request/response models: the API's contract, and its OpenAPI document."""
