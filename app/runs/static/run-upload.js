// The upload page's "Open a whole run" form (templates/step_record/upload_help.html), with script: the archive
// goes to POST /api/runs as the raw body of an XMLHttpRequest (fetch reports no upload progress), whose upload
// events feed the <progress> bar (percent and MB sent); then "Reading the run…" while the server unpacks and
// opens it; then the run explorer. Without script the same form posts multipart to /runs/new, which answers a 303
// to the explorer (or a page naming the files left out). Nothing here goes to another host. A refusal (issue 49) is
// said beside the form in the page's own words (the <template> run_upload_form.html renders), naming the archive,
// then brought into view with the form above it and focused.
(function () {
  "use strict";

  function mb(bytes) {
    return (bytes / 1048576).toFixed(bytes < 10485760 ? 1 : 0);
  }

  function init() {
    const form = document.getElementById("run-upload-form");
    if (!form) return;
    const input = form.querySelector("input[type=file]");
    const button = form.querySelector("button[type=submit]");
    const box = document.getElementById("run-upload-status");
    const bar = document.getElementById("run-upload-bar");
    const words = document.getElementById("run-upload-words");
    const failure = document.getElementById("run-upload-error");
    const blank = document.getElementById("run-upload-refusal"); // the refusal's words, name and reason left blank
    const maxBytes = Number(form.dataset.maxBytes);

    function reveal() {
      // the form and the message under it in the first view (the message alone when both do not fit), then the
      // reader's focus on the message
      const top = form.getBoundingClientRect().top;
      const end = failure.getBoundingClientRect();
      const room = window.innerHeight;
      if (top < 0 || end.bottom > room) {
        const span = end.bottom - top;
        const by = span <= room - 16 ? top - Math.min(48, (room - span) / 2) : end.top - 8;
        window.scrollBy({ top: by, left: 0, behavior: "instant" });
      }
      failure.focus({ preventScroll: true });
    }

    function fail(file, why) {
      box.hidden = true;
      failure.textContent = "";
      failure.classList.add("upload-refusal");
      if (blank && blank.content) {
        const said = blank.content.cloneNode(true);
        said.querySelector("[data-slot=file]").textContent = file ? file.name : "The archive";
        said.querySelector("[data-slot=why]").textContent = why + (/[.!?]$/.test(why) ? "" : ".");
        failure.append(said);
      } else {
        failure.textContent = why;
      }
      failure.hidden = false;
      button.disabled = false;
      input.setAttribute("aria-invalid", "true");
      reveal();
    }

    function refusedList(refused, url) {
      // Stored, but some files were left out: say which before moving on (the explorer does not list them).
      failure.textContent = "";
      failure.classList.remove("upload-refusal");
      const p = document.createElement("p");
      p.textContent = "The run is stored; " + refused.length + (refused.length === 1 ? " file was" : " files were") +
        " left out:";
      const list = document.createElement("ul");
      for (const r of refused) {
        const li = document.createElement("li");
        const code = document.createElement("code");
        code.textContent = r.path;
        li.append(code, ": " + r.why);
        list.append(li);
      }
      const link = document.createElement("a");
      link.href = url;
      link.className = "btn";
      link.textContent = "Open the run explorer";
      failure.append(p, list, link);
      failure.hidden = false;
      box.hidden = true;
    }

    function answered(xhr, file) {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch (e) {
        body = null;
      }
      if ((xhr.status === 200 || xhr.status === 201) && body && body.url) {
        if (body.refused && body.refused.length) {
          refusedList(body.refused, body.url);
          return;
        }
        words.textContent = "Opened: going to the run explorer…";
        window.location.assign(body.url);
        return;
      }
      const why = body && body.error ? body.error : "the server answered " + xhr.status;
      fail(file, " (" + xhr.status + "): " + why);
    }

    form.addEventListener("submit", function (event) {
      const file = input.files && input.files[0];
      if (!file) return; // the browser's `required` says so
      event.preventDefault();
      failure.hidden = true;
      input.removeAttribute("aria-invalid");
      if (maxBytes && file.size > maxBytes) {
        fail(file, ": it is " + mb(file.size) + " MB, and this server opens runs of at most " + mb(maxBytes) + " MB");
        return;
      }
      button.disabled = true;
      bar.max = 100;
      bar.value = 0;
      words.textContent = "0 % · 0 of " + mb(file.size) + " MB sent";
      box.hidden = false;

      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.dataset.api);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.addEventListener("progress", function (e) {
        if (!e.lengthComputable) return;
        const pct = Math.floor((100 * e.loaded) / e.total);
        bar.value = pct;
        words.textContent = pct + " % · " + mb(e.loaded) + " of " + mb(e.total) + " MB sent";
      });
      xhr.upload.addEventListener("load", function () {
        bar.value = 100;
        words.textContent = "100 % · " + mb(file.size) + " MB sent. Reading the run…";
      });
      xhr.addEventListener("load", function () {
        answered(xhr, file);
      });
      xhr.addEventListener("error", function () {
        fail(file, ": the upload stopped, the connection closed before the server answered. Try again");
      });
      xhr.send(file);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
