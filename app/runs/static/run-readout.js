// The run explorer's readout (issue 50; templates/runs/run.html), loaded on that page only.
//
// Pointing at any chart reads EVERY chart at the step under the pointer: a vertical rule at that step, a dot
// on each line, and the line above each chart says the step and its logged value (and the smoothed one when
// smoothing). On a focused chart (Tab), ← → move it a logged point at a time, Home/End to the ends, Escape
// hides it. The numbers are the server's: each chart's <svg> carries its drawn points as data attributes
// (views/run_charts.py: data-steps, data-ys, data-values, data-smooth-ys, data-smooth-values; the plot's
// place in data-plot and its steps in data-x-lo/-hi). No value is interpolated: each chart shows its nearest
// drawn point. The chart's links (its dots, marks) stay links: the layer drawn here takes no pointer events.
//
// The smoothing form (run_smooth_form.html) is a GET form without script; here a change swaps the explorer in
// place (htmx.ajax, the server drawing the smoothed lines) and history.replaceState keeps the URL.
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var CHARTS = "#run-charts svg.run-svg[data-steps]";
  var reading = null;  // the step being read, or null
  var cache = new WeakMap();

  function numbers(text) { return text ? text.split(" ").map(Number) : []; }
  function words(text) { return text ? text.split(" ") : []; }

  function data(svg) {
    var d = cache.get(svg);
    if (d) return d;
    var plot = numbers(svg.getAttribute("data-plot"));
    d = { steps: numbers(svg.getAttribute("data-steps")), ys: numbers(svg.getAttribute("data-ys")),
          values: words(svg.getAttribute("data-values")), sys: numbers(svg.getAttribute("data-smooth-ys")),
          svalues: words(svg.getAttribute("data-smooth-values")), lo: +svg.getAttribute("data-x-lo"),
          hi: +svg.getAttribute("data-x-hi"), left: plot[0], right: plot[1], top: plot[2], bottom: plot[3],
          width: svg.viewBox.baseVal.width };
    cache.set(svg, d);
    return d;
  }

  function xOf(d, step) { return d.left + (step - d.lo) / (d.hi - d.lo) * (d.right - d.left); }

  // the index of the drawn point nearest `step` (the earlier one on a tie)
  function nearest(d, step) {
    var lo = 0, hi = d.steps.length - 1;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (d.steps[mid] < step) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && step - d.steps[lo - 1] <= d.steps[lo] - step ? lo - 1 : lo;
  }

  function el(name, cls) {
    var e = document.createElementNS(SVG, name);
    e.setAttribute("class", cls);
    return e;
  }

  function layer(svg, d) {
    var g = svg.querySelector(":scope > .run-readout-layer");
    if (g) return g;
    g = el("g", "run-readout-layer");
    g.setAttribute("aria-hidden", "true");
    var rule = el("line", "run-readout-rule");
    rule.setAttribute("y1", d.top);
    rule.setAttribute("y2", d.bottom);
    g.appendChild(rule);
    g.appendChild(el("circle", "run-readout-dot"));
    if (d.sys.length) g.appendChild(el("circle", "run-readout-dot is-smooth"));
    g.querySelectorAll("circle").forEach(function (c) { c.setAttribute("r", "3.5"); });
    svg.appendChild(g);
    return g;
  }

  function readoutOf(svg) {
    var fig = svg.closest("figure");
    return fig ? fig.querySelector(".run-readout") : null;
  }

  function keepDefault(p) {
    if (!p.hasAttribute("data-default")) p.setAttribute("data-default", p.innerHTML);
  }

  function say(p, step, value, smooth) {
    keepDefault(p);
    p.textContent = "";
    var s = document.createElement("span");
    s.className = "run-readout-step";
    s.textContent = "step " + step;
    var v = document.createElement("b");
    v.className = "run-readout-value";
    v.textContent = value;
    p.append(s, ": ", v);
    if (smooth !== undefined) {
      var m = document.createElement("span"), b = document.createElement("b");
      m.className = "run-readout-smooth";
      b.textContent = smooth;
      m.append(" · smoothed ", b);
      p.append(m);
    }
    p.classList.add("is-reading");
  }

  function show(step) {
    reading = step;
    document.querySelectorAll(CHARTS).forEach(function (svg) {
      var d = data(svg);
      if (!d.steps.length) return;
      var i = nearest(d, step), x = xOf(d, d.steps[i]), g = layer(svg, d);
      var rule = g.querySelector(".run-readout-rule"), dots = g.querySelectorAll("circle");
      rule.setAttribute("x1", x);
      rule.setAttribute("x2", x);
      dots[0].setAttribute("cx", x);
      dots[0].setAttribute("cy", d.ys[i]);
      if (dots[1]) { dots[1].setAttribute("cx", x); dots[1].setAttribute("cy", d.sys[i]); }
      g.classList.add("is-on");
      var p = readoutOf(svg);
      if (p) say(p, d.steps[i], d.values[i], d.sys.length ? d.svalues[i] : undefined);
    });
  }

  function hide() {
    reading = null;
    document.querySelectorAll("#run-charts .run-readout-layer.is-on").forEach(function (g) { g.classList.remove("is-on"); });
    document.querySelectorAll("#run-charts .run-readout.is-reading").forEach(function (p) {
      p.innerHTML = p.getAttribute("data-default");
      p.classList.remove("is-reading");
    });
  }

  function announce(svg) {
    var out = document.getElementById("announcer"), p = readoutOf(svg), fig = svg.closest("figure");
    if (out && p && fig) out.textContent = fig.getAttribute("data-metric") + ": " + p.textContent;
  }

  // -- the pointer: the step under it, snapped to the chart's nearest drawn point --------------------------
  var pending = null, queued = false;
  document.addEventListener("pointermove", function (e) {
    var svg = e.target.closest && e.target.closest(CHARTS);
    if (!svg) return;
    var r = svg.getBoundingClientRect(), d = data(svg);
    if (!d.steps.length || !r.width) return;
    var vx = (e.clientX - r.left) / r.width * d.width;
    var step = d.lo + (vx - d.left) / (d.right - d.left) * (d.hi - d.lo);
    pending = d.steps[nearest(d, Math.max(d.lo, Math.min(d.hi, step)))];
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () {
      queued = false;
      if (pending !== null && pending !== reading) show(pending);
    });
  });
  document.addEventListener("pointerout", function (e) {
    var svg = e.target.closest && e.target.closest(CHARTS);
    if (!svg || (e.relatedTarget && svg.contains(e.relatedTarget)) || svg.matches(":focus-visible")) return;
    pending = null;
    hide();
  });

  // -- the keyboard, on a focused chart -------------------------------------------------------------------
  function start(svg) {
    var d = data(svg), p = readoutOf(svg);
    var shown = p && p.querySelector(".run-readout-step");  // the selected or last step, as the server said
    return shown ? +shown.textContent.replace(/\D/g, "") : d.steps[d.steps.length - 1];
  }
  document.addEventListener("keydown", function (e) {
    var svg = e.target, chart = svg.matches && svg.matches(CHARTS);
    if (e.key === "Escape" && reading !== null) {  // on a focused chart, or with the pointer on one
      if (chart) e.preventDefault();
      hide();
      return;
    }
    if (!chart || e.altKey || e.ctrlKey || e.metaKey) return;
    var d = data(svg);
    if (!d.steps.length) return;
    var i = nearest(d, reading === null ? start(svg) : reading);
    var to = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: d.steps.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    e.stopImmediatePropagation();  // app.js's ← → (a walkthrough's previous and next step) are not this page's
    show(d.steps[Math.max(0, Math.min(d.steps.length - 1, to))]);
    announce(svg);
  }, true);
  // Tab onto a chart: the readout at the step its line already said (the selected or last one)
  document.addEventListener("focusin", function (e) {
    var svg = e.target;
    if (!svg.matches || !svg.matches(CHARTS) || !svg.matches(":focus-visible") || reading !== null) return;
    show(data(svg).steps[nearest(data(svg), start(svg))]);
    announce(svg);
  });
  document.addEventListener("focusout", function (e) {
    if (e.target.matches && e.target.matches(CHARTS) && reading !== null
        && !(e.relatedTarget && e.relatedTarget.closest && e.relatedTarget.closest(CHARTS))) hide();
  });

  function focusable() {
    var hint = document.getElementById("run-readout-hint");
    if (hint) hint.hidden = false;  // said only where it works
    document.querySelectorAll(CHARTS).forEach(function (svg) {
      if (svg.hasAttribute("tabindex")) return;
      svg.setAttribute("tabindex", "0");
      svg.setAttribute("aria-keyshortcuts", "ArrowLeft ArrowRight Home End Escape");
      var p = readoutOf(svg);
      if (p && p.id) svg.setAttribute("aria-describedby", p.id);
    });
  }

  // -- smoothing in place ------------------------------------------------------------------------------------
  // A weight typed while the page for another is on its way: the last one typed wins. The swap replaces the
  // form (its input keeps focus by its id, htmx's rule) so each request is made from the form in the page, the
  // value typed put back into it, and a page for any other weight than the last asked is not swapped in.
  var timer = null, typed = null, latest = null;
  function smoothUrl(form) {
    var url = new URL(form.getAttribute("action") || "", location.href), params = new URLSearchParams();
    new FormData(form).forEach(function (v, k) { if (!(k === "smooth" && +v === 0)) params.append(k, v); });
    url.search = params.toString();
    url.hash = "";
    return url;
  }
  function smooth() {
    var form = document.getElementById("run-smooth-form"), input = document.getElementById("run-smooth");
    if (!form || !input) return false;
    if (typed !== null) { input.value = typed; typed = null; }
    if (!window.htmx || input.value === "" || !input.checkValidity()) return false;
    var url = smoothUrl(form);
    latest = url.pathname + url.search;
    if (url.href === location.href.split("#")[0]) return true;  // the page shown: nothing to ask, nothing to swap in
    window.htmx.ajax("GET", latest, { source: form, target: "#run-explorer", select: "#run-explorer", swap: "outerHTML" });
    return true;
  }
  document.addEventListener("input", function (e) {
    if (e.target.id !== "run-smooth") return;
    typed = e.target.value;
    clearTimeout(timer);
    timer = setTimeout(smooth, 250);
  });
  document.addEventListener("submit", function (e) {
    if (e.target.id !== "run-smooth-form") return;
    clearTimeout(timer);
    if (smooth()) e.preventDefault();
  });
  function fromSmoothing(e) {
    var d = e.detail || {}, cfg = d.requestConfig || {};
    return cfg.elt && cfg.elt.id === "run-smooth-form" && d.pathInfo ? d.pathInfo.requestPath : null;
  }
  // capture: before landing.js's listener reads shouldSwap
  document.addEventListener("htmx:beforeSwap", function (e) {
    var path = fromSmoothing(e);
    if (path && path !== latest) e.detail.shouldSwap = false;
  }, true);
  document.addEventListener("htmx:afterSwap", function (e) {
    var path = fromSmoothing(e);
    if (!path) return;
    history.replaceState(history.state, "", path + location.hash);
    var input = document.getElementById("run-smooth");
    if (input && typed !== null) input.value = typed;  // typed while this page was on its way
  });
  document.addEventListener("htmx:afterSettle", function () { reading = null; focusable(); });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", focusable);
  else focusable();
})();
