// Linked views: pointing at (or focusing) one sample anywhere in the Inspector marks the
// same sample everywhere else: its row of the group table, its advantage bar, its marker
// on the clip plot, its filled-formula line, and the probability bar of the choice it made.
//
// Markup (templates/partials/inspector.html, templates/macros/charts.html):
//   data-sample="i"     a row, bar or line of sample i
//   data-samples="i j"  a mark shared by several samples (one point of the clip plot)
//   data-choice="c"     the action chosen; a probability bar carries only this, and then
//                       stands for every sample that chose c
// Highlighted elements get the class "is-linked" (static/css/linked.css). Delegated on
// document, so it keeps working after every htmx swap; no library.
(function () {
  "use strict";

  var CLASS = "is-linked";
  var SOURCE = "[data-sample], [data-samples], [data-choice]";

  function tokens(el, name) {
    var v = el.getAttribute(name);
    return v ? v.split(/\s+/).filter(Boolean) : [];
  }

  // The inspector and the step's focus figure each link within themselves: the figure's table
  // and chart show the same group as the inspector's, and one sample should light once.
  function scopeOf(el) {
    return el.closest("#inspector, #story-figure") || document;
  }

  // The samples and choices that `src` stands for.
  function linkedTo(src) {
    var scope = scopeOf(src);
    var samples = tokens(src, "data-samples").concat(tokens(src, "data-sample"));
    var choices = tokens(src, "data-choice");
    if (!samples.length && choices.length) {
      scope.querySelectorAll("[data-sample][data-choice]").forEach(function (el) {
        if (choices.indexOf(el.getAttribute("data-choice")) >= 0) samples.push(el.getAttribute("data-sample"));
      });
    }
    scope.querySelectorAll("[data-sample][data-choice]").forEach(function (el) {
      var c = el.getAttribute("data-choice");
      if (samples.indexOf(el.getAttribute("data-sample")) >= 0 && choices.indexOf(c) < 0) choices.push(c);
    });
    return { scope: scope, samples: samples, choices: choices };
  }

  function clear() {
    document.querySelectorAll("." + CLASS).forEach(function (el) { el.classList.remove(CLASS); });
  }

  function mark(src) {
    clear();
    var link = linkedTo(src);
    if (!link.samples.length && !link.choices.length) return;
    link.scope.querySelectorAll(SOURCE).forEach(function (el) {
      if (el.classList.contains("hit")) return; // the hit regions are invisible; their marks show it
      var hit = tokens(el, "data-sample").concat(tokens(el, "data-samples")).some(function (s) {
        return link.samples.indexOf(s) >= 0;
      });
      // A mark that only names a choice (a probability bar) lights up for that choice.
      if (!hit && !el.hasAttribute("data-sample") && !el.hasAttribute("data-samples")) {
        hit = link.choices.indexOf(el.getAttribute("data-choice")) >= 0;
      }
      if (hit) el.classList.add(CLASS);
    });
  }

  function sourceOf(target) {
    var src = target && target.closest ? target.closest(SOURCE) : null;
    return src && src.closest("#inspector, #story-figure") ? src : null;
  }

  document.addEventListener("mouseover", function (e) {
    var src = sourceOf(e.target);
    if (src && !(e.relatedTarget && src.contains(e.relatedTarget))) mark(src);
  });
  document.addEventListener("mouseout", function (e) {
    var src = sourceOf(e.target);
    if (!src || (e.relatedTarget && src.contains(e.relatedTarget))) return;
    // Back to the focused sample, if any, once the pointer leaves.
    var focused = sourceOf(document.activeElement);
    if (focused) mark(focused); else clear();
  });
  document.addEventListener("focusin", function (e) {
    var src = sourceOf(e.target);
    if (src) mark(src); else clear();
  });
  document.addEventListener("focusout", function (e) {
    if (sourceOf(e.target) && !sourceOf(e.relatedTarget)) clear();
  });
  document.documentElement.setAttribute("data-linked-views", "on");
})();
