"""The "Open a whole run" form's refusal as the upload page says it (issue 49), in the house's parts
(app/views/upload_refusal.py): the archive's name, what is wrong, what to do, the form right under it. Without
script the form's answer renders it at the top of the upload page; with script, run-upload.js fills the same
words in beside the form (`TEMPLATE`: its name and reason left blank, templates/runs/run_upload_form.html)."""
from __future__ import annotations

from app.views.upload_refusal import Link, Refusal, file_name

FORM = "run_explorer/run_upload_form.html"
LINKS = (Link("What the archive should hold", "#run-upload-what"), Link("How to record a step", "#how-to-record"))
NOT_OPENED = "was not opened as a run"
WHAT = "the run's output folder as one .zip, .tar or .tar.gz, without its checkpoints' weights."
WHAT_TO_DO = f"Choose another archive below: {WHAT}"
WHAT_TO_DO_BY_STATUS = {
    400: "Make the archive again from the run's output folder (zip, or tar with or without gzip) and choose it "
         "again below, or choose another archive.",
    413: "Archive the run's logs and dumps without its checkpoints' weights, then choose that archive below.",
    503: "Nothing was stored. Try again in a while, or choose another archive below.",
    507: "Nothing was stored. Try again once the server has room, or choose another archive below.",
}


def run_refusal(filename: str | None, why: str, status: int) -> Refusal:
    """The form's refusal: ArchiveRefused's words (the member and field first, as the API's `error`)."""
    return Refusal(file_name(filename, "The archive"), status, why, WHAT_TO_DO_BY_STATUS.get(status, WHAT_TO_DO),
                   LINKS, FORM, NOT_OPENED)


# beside the form, under it (run-upload.js)
TEMPLATE = Refusal("", 0, "", f"Choose another archive above: {WHAT}", LINKS, FORM, NOT_OPENED)

__all__ = ["FORM", "TEMPLATE", "run_refusal"]
