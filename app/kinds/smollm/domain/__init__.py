"""The real model kind's domain layer: empty until the kind's pages are built (issue 33); here so the layer
contract (pyproject.toml, every kind has web -> views -> engine -> domain) holds."""
