"""A refused upload as the upload page says it (issue 49): at the top of the page, under its title, focused, a
message that names the file (as the browser sent its name), says what is wrong (the field the check stopped at, and
why) and what to do, with the form to choose another file right under it (templates/pages/upload_refusal.html).

The record or snapshot form's refusals are built here (`record_refusal`); a kind that adds a form of its own to the
page (Kind.upload_help) builds its refusals from the same parts and answers them with the same page."""
from __future__ import annotations

import re
from dataclasses import dataclass

SOURCE = "<upload>: "  # the upload store's name for the file in its messages (domain/uploads.py)
MAX_NAME = 120  # characters of a file name shown; past it, cut with an ellipsis
RECORD_FORM = "pages/upload_record_form.html"
# every format's own part of the upload page (its help: what it is, how to make one)
FORMATS = "#upload-formats"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Link:
    text: str
    href: str  # a fragment of the upload page, or a path of this site


@dataclass(frozen=True)
class Refusal:
    filename: str
    status: int
    why: str  # what is wrong, said plainly (after `field` when there is one)
    todo: str  # what to do (the form is right under the message)
    links: tuple[Link, ...]  # how such a file is made
    form: str  # the template of the form shown right under the message, to choose another file
    not_opened: str = "was not opened"  # after the file's name, in the message's title
    field: str | None = None  # the JSON path the check stopped at ("$": the file as a whole)
    words: str | None = None  # the check's own words (the API's `error`), when `why` retells them
    words_id: str | None = None  # their element's id (the form's input is described by it)


def file_name(raw: str | None, fallback: str = "Your file") -> str:
    """The name the browser sent, as shown: its last path part (some browsers send a whole path), without control
    characters, at most MAX_NAME characters. Escaped where it is shown, like any text."""
    name = _CONTROL.sub("", (raw or "").replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if not name:
        return fallback
    return name if len(name) <= MAX_NAME else name[:MAX_NAME - 1] + "…"


def checked(message: str) -> tuple[str | None, str]:
    """(field, what is wrong there) of a check's message `<upload>: PATH: MESSAGE`; (None, message) otherwise."""
    if message.startswith(SOURCE):
        path, sep, detail = message[len(SOURCE):].partition(": ")
        if sep and path:
            return path, detail
    return None, message


def record_refusal(filename: str | None, message: str, status: int) -> Refusal:
    """The record or snapshot form's refusal (UploadRejected: its status and message)."""
    name = file_name(filename)
    formats = (Link("How to make each file this page opens", FORMATS),)
    field, detail = checked(message) if status == 422 else (None, message)
    if field is None:
        todo = {413: "Choose a smaller file below.",
                409: "Change any byte of the file (e.g. its snapshotId) and choose it again below."}.get(
            status, "Nothing was stored. Try again in a while, or choose another file below.")
        return Refusal(name, status, detail, todo, formats, RECORD_FORM, words_id="upload-error")
    why = detail
    if field == "format" and detail == "Field required":  # JSON, but it says of no format what it is
        why += ". A file this page opens says which format it is in a top-level \"format\" field; this one has none"
    todo = ("Choose another file below, or mend that field and choose the file again." if field != "$" else
            "Choose another file below: a JSON file of one of the formats this page opens.")
    return Refusal(name, status, why, todo, formats, RECORD_FORM, field=field, words=message,
                   words_id="upload-error")


__all__ = ["FORMATS", "Link", "RECORD_FORM", "Refusal", "checked", "file_name", "record_refusal"]
