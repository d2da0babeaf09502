"""Reading a Content-Security-Policy header in tests."""


def csp_directives(value: str) -> dict[str, list[str]]:
    """'default-src 'self'; img-src 'self' data:' -> {'default-src': ["'self'"], 'img-src': [...]}"""
    out = {}
    for part in value.split(";"):
        words = part.split()
        if words:
            out[words[0].lower()] = words[1:]
    return out
