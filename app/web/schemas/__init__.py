"""JSON bodies of the API: pydantic models (what OpenAPI documents) and their builders."""
