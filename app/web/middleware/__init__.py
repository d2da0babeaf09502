"""Pure ASGI middleware: security headers on every response, whole-response cache."""
