"""Web layer: FastAPI only. App factory, settings, dependencies, routes, JSON schemas,
error handlers, middleware and template rendering. Imports views, engine and domain."""
