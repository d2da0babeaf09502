// GRPO walkthrough: progressive enhancement over server-rendered HTML.
// Everything works as plain links and forms; this adds htmx swaps, pan/zoom
// (Panzoom 4.6.2, MIT), camera animation between steps, and keyboard use.
(function () {
  "use strict";

  var reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");
  var panzoom = null;
  var previous = { camera: null, step: null, focusId: null };

  function parseCamera(text) {
    var p = (text || "").split(",").map(Number);
    return p.length === 3 && p.every(isFinite) ? { x: p[0], y: p[1], z: p[2] } : null;
  }

  function cameraTransform(c) {
    return "translate(" + c.x + " " + c.y + ") scale(" + c.z + ")";
  }

  // Tween the saved camera of the new step from where the old one was.
  function animateCamera(from, to) {
    var g = document.getElementById("camera");
    if (!g || !from || !to || reducedMotion.matches) return;
    if (from.x === to.x && from.y === to.y && from.z === to.z) return;
    var start = null, duration = 450;
    g.setAttribute("transform", cameraTransform(from));
    // A data attribute, not a class: htmx's settle step resets the class of elements
    // with an id (#camera) 20 ms after the swap.
    g.setAttribute("data-moving", "true");
    function frame(t) {
      if (start === null) start = t;
      var k = Math.min(1, (t - start) / duration);
      var e = k < 0.5 ? 2 * k * k : 1 - Math.pow(-2 * k + 2, 2) / 2; // ease-in-out
      if (k < 1) {
        g.setAttribute("transform", cameraTransform({
          x: from.x + (to.x - from.x) * e, y: from.y + (to.y - from.y) * e, z: from.z + (to.z - from.z) * e }));
        requestAnimationFrame(frame);
      } else {
        g.setAttribute("transform", cameraTransform(to)); // exactly the saved camera
        g.removeAttribute("data-moving");
      }
    }
    requestAnimationFrame(frame);
  }

  // start: {pan: {x, y}, scale} to begin where the user was (Panzoom applies its start
  // position in a timeout, so it cannot be set by a pan() call right after creation).
  function setupPanzoom(start) {
    // With script, a node is one Tab stop (Enter activates it); its inner links
    // are the no-script fallback and would triple the stops.
    document.querySelectorAll(".graph a").forEach(function (a) { a.setAttribute("tabindex", "-1"); });
    var target = document.querySelector(".pan-target");
    if (!target || typeof Panzoom === "undefined") return;
    start = start && start.pan ? start : { pan: { x: 0, y: 0 }, scale: 1 };
    panzoom = Panzoom(target, { maxScale: 8, minScale: 0.25, step: 0.2, cursor: "grab",
                                animate: !reducedMotion.matches, duration: 200,
                                startX: start.pan.x, startY: start.pan.y, startScale: start.scale });
    target.parentElement.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); panzoom.zoomWithWheel(e); }
    }, { passive: false });
    var downAt = null;
    target.addEventListener("pointerdown", function (e) { downAt = { x: e.clientX, y: e.clientY }; });
    // A drag ends with a click on whatever is under the pointer: swallow it.
    target.addEventListener("click", function (e) {
      if (downAt && Math.hypot(e.clientX - downAt.x, e.clientY - downAt.y) > 4) {
        e.preventDefault(); e.stopPropagation();
      }
      downAt = null;
    }, true);
  }

  function go(url) {
    if (url) htmx.ajax("GET", url, { target: "#view", swap: "innerHTML" }).then(null, function () {});
  }

  function activate(node) {
    go(node.getAttribute("data-toggle-href") || node.getAttribute("data-href"));
  }

  function inEditable(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  document.addEventListener("click", function (e) {
    var action = e.target.closest("[data-action]");
    if (action && panzoom) {
      var a = action.getAttribute("data-action");
      if (a === "reset-view") panzoom.reset();
      if (a === "zoom-in") panzoom.zoomIn();
      if (a === "zoom-out") panzoom.zoomOut();
      return;
    }
    var node = e.target.closest(".graph [data-node-id]");
    if (node) { e.preventDefault(); activate(node); }
  });

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var node = t.closest && t.closest(".graph [data-node-id]");
    if (node && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); activate(node); return; }
    if (t.getAttribute && t.getAttribute("role") === "button" && t.tagName === "A" && e.key === " ") {
      e.preventDefault(); t.click(); return;
    }
    if (inEditable(t)) return;
    if (e.shiftKey && panzoom && e.key.indexOf("Arrow") === 0) {
      var d = 60, dx = { ArrowLeft: d, ArrowRight: -d }[e.key] || 0, dy = { ArrowUp: d, ArrowDown: -d }[e.key] || 0;
      e.preventDefault(); panzoom.pan(dx, dy, { relative: true }); return;
    }
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      var link = document.getElementById(e.key === "ArrowLeft" ? "prev-step" : "next-step");
      if (link) { e.preventDefault(); link.click(); }
      return;
    }
    if (!panzoom) return;
    if (e.key === "+" || e.key === "=") { e.preventDefault(); panzoom.zoomIn(); }
    else if (e.key === "-" || e.key === "_") { e.preventDefault(); panzoom.zoomOut(); }
    else if (e.key === "0") { e.preventDefault(); panzoom.reset(); }
  });

  // Keyboard focus can land on a node outside the frame (a step's camera shows only part
  // of the graph): pan it into view, so focus is never hidden. Only for keyboard focus
  // (:focus-visible): moving a node under a pressed mouse would turn its click into a miss.
  // The frame itself never scrolls; panning is the only way its content moves.
  function reveal(node) {
    var frame = document.querySelector(".graph-frame");
    if (!frame || !panzoom || !node.isConnected) return;
    // During a camera tween the node is still moving: measure once it has landed.
    if (document.querySelector("#camera[data-moving]")) { setTimeout(function () { reveal(node); }, 60); return; }
    frame.scrollLeft = 0; frame.scrollTop = 0;
    var f = frame.getBoundingClientRect(), r = node.getBoundingClientRect(), m = 16;
    function shift(lo, hi, flo, fhi) {
      if (hi - lo > fhi - flo - 2 * m || lo < flo + m) return flo + m - lo;
      return hi > fhi - m ? fhi - m - hi : 0;
    }
    var dx = shift(r.left, r.right, f.left, f.right), dy = shift(r.top, r.bottom, f.top, f.bottom);
    if (dx || dy) {
      var s = panzoom.getScale();
      panzoom.pan(dx / s, dy / s, { relative: true, animate: false });
    }
  }

  document.addEventListener("focusin", function (e) {
    var node = e.target.closest && e.target.closest(".graph [data-node-id]");
    if (node && node.matches(":focus-visible")) requestAnimationFrame(function () { reveal(node); });
  });

  function remember() {
    var frame = document.querySelector(".graph-frame");
    var content = document.querySelector(".view-content");
    var active = document.activeElement;
    previous.camera = frame ? parseCamera(frame.getAttribute("data-camera")) : null;
    previous.step = content ? content.getAttribute("data-step-id") : null;
    var focusedNode = active && active.closest ? active.closest("[data-node-id]") : null;
    previous.focusId = focusedNode ? focusedNode.getAttribute("data-node-id") : null;
    previous.focusFormField = active && active.closest && active.closest("#param-form") ? active.id : null;
    previous.pan = panzoom ? { pan: panzoom.getPan(), scale: panzoom.getScale() } : null;
  }

  function afterSwap(target) {
    var content = document.querySelector(".view-content");
    if (!content) return;
    if (target && target.id === "view") {
      var stepChanged = previous.step !== content.getAttribute("data-step-id");
      // Same step (a module opened, a node selected, parameters changed): keep the user's
      // pan and zoom, or the module they just opened would jump back out of the frame.
      setupPanzoom(stepChanged ? null : previous.pan);
      var frame = document.querySelector(".graph-frame");
      if (stepChanged) animateCamera(previous.camera, parseCamera(frame && frame.getAttribute("data-camera")));
      document.title = content.getAttribute("data-title") || document.title;
      var announcer = document.getElementById("announcer");
      var selected = document.querySelector("[data-node-title]");
      if (announcer) announcer.textContent = stepChanged ? content.getAttribute("data-announce")
        : (selected ? "Inspector: " + selected.getAttribute("data-node-title") : "");
      // Keep the keyboard user's place in the graph across the swap.
      if (previous.focusId) {
        var again = document.querySelector('.graph [data-node-id="' + CSS.escape(previous.focusId) + '"]');
        if (again) again.focus({ preventScroll: true });
      }
    }
    if (previous.focusFormField) {
      var field = document.getElementById(previous.focusFormField);
      var invalid = document.querySelector("#param-form [aria-invalid=true]");
      (invalid || field) && (invalid || field).focus();
    }
  }

  // htmx keeps a copy of the page's HTML for Back/Forward. Panzoom's inline styles must
  // not go into it: restoring them as style attributes is refused by the CSP. Strip them
  // while htmx copies the page (synchronously, right after this event), then put them back.
  document.addEventListener("htmx:beforeHistorySave", function () {
    var styled = Array.prototype.slice.call(document.querySelectorAll(".graph-frame[style], .pan-target[style]"));
    var saved = styled.map(function (el) { return el.style.cssText; });
    styled.forEach(function (el) { el.removeAttribute("style"); });
    queueMicrotask(function () {
      styled.forEach(function (el, i) { if (el.isConnected) el.style.cssText = saved[i]; });
    });
  });

  // Back/Forward put an earlier copy of the page back: bind pan/zoom to its elements and
  // show the step's saved camera (the copy may have been taken in the middle of a tween).
  document.addEventListener("htmx:historyRestore", function () {
    var g = document.getElementById("camera");
    var frame = document.querySelector(".graph-frame");
    var camera = parseCamera(frame && frame.getAttribute("data-camera"));
    if (g && camera) { g.setAttribute("transform", cameraTransform(camera)); g.removeAttribute("data-moving"); }
    setupPanzoom();
  });

  document.addEventListener("htmx:beforeSwap", remember);
  document.addEventListener("htmx:afterSwap", function (e) { afterSwap(e.detail.target); });
  reducedMotion.addEventListener && reducedMotion.addEventListener("change", setupPanzoom);
  document.addEventListener("DOMContentLoaded", setupPanzoom);
})();
