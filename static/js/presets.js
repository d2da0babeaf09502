// Choosing a preset in the parameter form fills every loss convention with that preset's
// value (templates/partials/param_form.html: the preset <select> carries them all in
// data-preset-values). Without this, the form would send the old preset's values back as
// explicit overrides. Without script the form still submits; the page then names each
// field that differs from the chosen preset ("β overridden to 0.04").
// Delegated on document, so it keeps working after every htmx swap; no library.
(function () {
  "use strict";

  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("select[data-preset-values]")) return;
    var all;
    try { all = JSON.parse(select.getAttribute("data-preset-values")); } catch (e) { return; }
    var values = all[select.value];
    if (!values || !select.form) return;
    Object.keys(values).forEach(function (name) {
      var field = select.form.elements.namedItem(name);
      if (field && field !== select && "value" in field) field.value = values[name];
    });
  });
})();
