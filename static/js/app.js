// GRPO walkthrough: progressive enhancement over server-rendered HTML.
// Everything works as plain links and forms; this adds htmx swaps, the fitted camera
// (camera.js), pan/zoom (Panzoom 4.6.2, MIT), semantic zoom, edge tags at the frame's
// edge, keyboard use. Where focus and scroll land after a swap: landing.js.
(function () {
  "use strict";

  var reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");
  var panzoom = null;
  var base = null;          // the fitted camera (frame pixels) that pan/zoom starts from
  var previous = { camera: null, step: null };

  function parseNumbers(text) {
    var p = (text || "").split(",").map(Number);
    return p.every(isFinite) ? p : null;
  }

  function cameraTransform(c) {
    return "translate(" + c.x + " " + c.y + ") scale(" + c.z + ")";
  }

  function rectBox(rect) {
    return { x: +rect.getAttribute("x"), y: +rect.getAttribute("y"),
             width: +rect.getAttribute("width"), height: +rect.getAttribute("height") };
  }

  // -- the camera ---------------------------------------------------------------------

  // The step's camera fitted to the frame the browser has (camera.js). Sets the SVG's user
  // units to frame pixels, so the camera transform alone places the graph.
  var fittedFor = null;     // the layout and frame size the current base was fitted to
  function layoutKey() {
    var frame = document.querySelector(".graph-frame");
    var svg = document.getElementById("graph");
    if (!frame || !svg) return null;
    return (svg.getAttribute("data-layout") || "") + "@" + frame.clientWidth + "x" + frame.clientHeight;
  }

  // A node's box for the fit: its rect, with room for a note above it (the rewards line) and a
  // warning under it. Not the text's own extent: that changes as fonts load, and the same URL
  // must always get the same camera.
  function nodeBox(svg, id) {
    var g = svg.querySelector('.graph [data-node-id="' + CSS.escape(id) + '"]');
    if (!g) return null;
    var b = rectBox(g.querySelector(":scope > rect"));
    if (g.querySelector(":scope > .annotation")) { b.y -= 34; b.height += 34; }
    if (g.querySelector(":scope > .warning-text")) b.height += 20;
    return b;
  }

  function fitCamera() {
    var frame = document.querySelector(".graph-frame");
    var svg = document.getElementById("graph");
    var g = document.getElementById("camera");
    if (!frame || !svg || !g || !window.GRPOCamera) return null;
    var size = { width: frame.clientWidth, height: frame.clientHeight };
    if (!size.width || !size.height) return null;
    svg.setAttribute("viewBox", "0 0 " + size.width + " " + size.height);
    var camera;
    if (svg.getAttribute("data-fit") === "all") {
      var all = Array.prototype.map.call(svg.querySelectorAll(".node > .box, .node > .container-box"), rectBox);
      camera = GRPOCamera.fitAll(all, size, 1.25, GRPOCamera.READABLE_PX / GRPOCamera.LABEL_PX);
    } else {
      function boxes(ids) {
        return ids.map(function (id) { return nodeBox(svg, id); }).filter(Boolean);
      }
      var need = boxes(JSON.parse(frame.getAttribute("data-framed") || "[]"));
      var context = boxes(JSON.parse(svg.getAttribute("data-context") || "[]"));
      camera = GRPOCamera.fit(need, context, size);
    }
    frame.setAttribute("data-fitted", [camera.x, camera.y, camera.z].join(","));
    frame.setAttribute("data-fitted-for", size.width + "x" + size.height);
    fittedFor = layoutKey();
    return camera;
  }

  // A swap that keeps the step keeps the camera, but its new SVG comes with the server's
  // viewBox (the saved viewport, scaled into the frame: 3.5 px labels on a phone): the user
  // units are set to frame pixels again here, before the camera applies.
  function setCamera(c) {
    var g = document.getElementById("camera");
    var frame = document.querySelector(".graph-frame");
    var svg = document.getElementById("graph");
    if (frame && svg && frame.clientWidth && frame.clientHeight) {
      var vb = "0 0 " + frame.clientWidth + " " + frame.clientHeight;
      if (svg.getAttribute("viewBox") !== vb) svg.setAttribute("viewBox", vb);
    }
    if (g && c) g.setAttribute("transform", cameraTransform(c));
  }

  // Tween from where the old step's camera was to the new step's fitted camera.
  function animateCamera(from, to) {
    var g = document.getElementById("camera");
    if (!g || !to) return;
    if (!from || reducedMotion.matches || (from.x === to.x && from.y === to.y && from.z === to.z)) {
      setCamera(to); afterMove(); return;
    }
    var start = null, duration = 450;
    setCamera(from);
    // A data attribute, not a class: htmx's settle step resets the class of elements
    // with an id (#camera) 20 ms after the swap.
    g.setAttribute("data-moving", "true");
    function frame(t) {
      if (start === null) start = t;
      var k = Math.min(1, (t - start) / duration);
      var e = k < 0.5 ? 2 * k * k : 1 - Math.pow(-2 * k + 2, 2) / 2; // ease-in-out
      if (k < 1) {
        setCamera({ x: from.x + (to.x - from.x) * e, y: from.y + (to.y - from.y) * e, z: from.z + (to.z - from.z) * e });
        requestAnimationFrame(frame);
      } else {
        setCamera(to);
        g.removeAttribute("data-moving");
        afterMove();
      }
    }
    requestAnimationFrame(frame);
  }

  // -- semantic zoom and edge tags -------------------------------------------------------

  // Labels keep a readable size however far out the view is (up to 3x their world
  // size); the op and shape lines hide when they would be too small to read.
  function semanticZoom() {
    var svg = document.getElementById("graph");
    if (!svg || !base) return;
    var k = base.z * (panzoom ? panzoom.getScale() : 1);
    var labelPx = GRPOCamera.LABEL_PX * k;
    var boost = labelPx < GRPOCamera.READABLE_PX ? Math.min(3, GRPOCamera.READABLE_PX / labelPx) : 1;
    svg.style.setProperty("--label-boost", String(boost));
    // the 11-unit lines hide as soon as they would be under 11 px (the overview can zoom out)
    svg.classList.toggle("zoom-far", GRPOCamera.DETAIL_PX * k < GRPOCamera.READABLE_PX - 0.01);
  }

  // An edge with an end outside the frame fades, and a tag at the frame's edge names the
  // node it goes to (or comes from), so a cut-off arc still says where it leads.
  function edgeTags() {
    var frame = document.querySelector(".graph-frame");
    var layer = frame && frame.querySelector(".edge-tags");
    if (!layer) return;
    layer.textContent = "";
    var f = frame.getBoundingClientRect(), seen = {}, placed = [];
    // Nodes and notes in the frame are obstacles too: a tag must not hide a label.
    frame.querySelectorAll(".graph .node > rect:first-of-type, .graph .annotation-text").forEach(function (el) {
      var r = el.getBoundingClientRect();
      // An open module is a frame, not a label: only its header (name, id, ±) is an obstacle.
      var h = el.classList.contains("container-box") ? Math.min(r.height, 60 * (base ? base.z : 1)) : r.height;
      if (r.right > f.left && r.left < f.right && r.top + h > f.top && r.top < f.bottom)
        placed.push({ left: r.left - f.left, top: r.top - f.top, w: r.width, h: h, obstacle: true });
    });
    function inside(p) { return p.x >= f.left && p.x <= f.right && p.y >= f.top && p.y <= f.bottom; }
    function nodeIn(id) {
      var n = document.querySelector('.graph [data-node-id="' + CSS.escape(id) + '"]');
      if (!n) return null;
      var r = n.getBoundingClientRect();
      return { el: n, visible: r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom };
    }
    document.querySelectorAll(".graph .edge").forEach(function (path) {
      var s = nodeIn(path.getAttribute("data-source")), t = nodeIn(path.getAttribute("data-target"));
      if (!s || !t) return;
      var out = !s.visible ? s : (!t.visible ? t : null);
      path.classList.toggle("offscreen", !s.visible || !t.visible);
      if (!out || (!s.visible && !t.visible)) return;
      // Walk the path from its visible end to the last point still inside the frame.
      var m = path.getScreenCTM(), len = path.getTotalLength(), steps = 48, last = null;
      for (var i = 0; i <= steps; i++) {
        var at = (out === t ? i : steps - i) / steps * len;
        var q = path.getPointAtLength(at);
        var p = { x: m.a * q.x + m.c * q.y + m.e, y: m.b * q.x + m.d * q.y + m.f };
        if (inside(p)) last = p; else if (last) break;
      }
      if (!last) return;
      var id = out.el.getAttribute("data-node-id");
      var key = id + (out === t ? ">" : "<");
      if (seen[key]) return;
      seen[key] = true;
      var tag = document.createElement("span");
      tag.className = "edge-tag";
      tag.textContent = (out === t ? "→ " : "← ") + (out.el.getAttribute("data-display") || id);
      layer.appendChild(tag);
      var w = tag.offsetWidth, h = tag.offsetHeight;
      var left = Math.max(2, Math.min(f.width - w - 2, last.x - f.left - w / 2));
      var top = Math.max(2, Math.min(f.height - h - 2, last.y - f.top - h / 2));
      // A tag that would cover a node, a note or another tag moves along the frame's edge
      // (down in the top half, up in the bottom half) to the nearest free place.
      var dir = top > f.height / 2 ? -1 : 1, start = top;
      function hits(t) {
        return placed.some(function (p) { return left < p.left + p.w && p.left < left + w && t < p.top + p.h && p.top < t + h; });
      }
      for (var tries = 0; tries < 40 && hits(top); tries++) top += dir * 6;
      if (hits(top) || top < 0 || top + h > f.height) top = start;
      placed.push({ left: left, top: top, w: w, h: h });
      tag.style.left = left + "px";
      tag.style.top = top + "px";
    });
  }

  var moveQueued = false;
  function afterMove() {
    if (moveQueued) return;
    moveQueued = true;
    requestAnimationFrame(function () { moveQueued = false; semanticZoom(); edgeTags(); });
  }

  // -- pan and zoom ----------------------------------------------------------------------

  // start: {pan: {x, y}, scale} to begin where the user was (Panzoom applies its start
  // position in a timeout, so it cannot be set by a pan() call right after creation).
  function setupPanzoom(start) {
    // With script, a node is one Tab stop (Enter selects it); its label link is the
    // no-script fallback. A module's ± stays its own stop: it opens or closes the module.
    document.querySelectorAll(".graph .node-link").forEach(function (a) { a.setAttribute("tabindex", "-1"); });
    var target = document.querySelector(".pan-target");
    // A swap that kept the step but moved the boxes (a module opened or closed: dot lays the
    // graph out afresh) or a new frame size: the old camera and pan frame nothing; fit anew.
    var frame = document.querySelector(".graph-frame");
    if (fittedFor !== layoutKey()) { base = fitCamera(); start = null; }
    else if (frame) frame.setAttribute("data-fitted-for", frame.clientWidth + "x" + frame.clientHeight);
    if (frameWatch && frame) { frameWatch.disconnect(); frameWatch.observe(frame); }
    if (!target || typeof Panzoom === "undefined") return;
    start = start && start.pan ? start : { pan: { x: 0, y: 0 }, scale: 1 };
    panzoom = Panzoom(target, { maxScale: 8, minScale: 0.2, step: 0.2, cursor: "grab",
                                animate: !reducedMotion.matches, duration: 200,
                                startX: start.pan.x, startY: start.pan.y, startScale: start.scale });
    target.parentElement.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); panzoom.zoomWithWheel(e); }
    }, { passive: false });
    target.addEventListener("panzoomchange", afterMove);
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

  // The graph of a fresh screen: fit the camera, bind pan/zoom, tags. A node selected
  // beyond the step's own (a copied URL) is panned into the frame once it has landed.
  // The frame can change size without the window doing so (the page above it settles, a
  // scroll bar comes or goes): fit again then, as a resize does.
  var frameWatch = window.ResizeObserver ? new ResizeObserver(function () {
    if (fittedFor === null || fittedFor === layoutKey()) return;
    base = fitCamera();
    setCamera(base);
    if (panzoom) panzoom.reset({ animate: false });
    afterMove();
  }) : null;

  function setupGraph(panStart, animateFrom) {
    base = fitCamera();
    setupPanzoom(panStart);
    if (animateFrom) animateCamera(animateFrom, base); else { setCamera(base); afterMove(); }
    var selected = document.querySelector(".graph .node.selected");
    if (selected) setTimeout(function () { reveal(selected); }, 0);
  }

  // -- requests ----------------------------------------------------------------------------

  // The event goes with the request: a swap someone asked for is one an event started (landing.js).
  function go(url, source, event) {
    if (!url) return;
    htmx.ajax("GET", url, { target: "#view", swap: "innerHTML", source: source, event: event }).then(null, function () {});
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
    // A module's ± opens or closes it; anywhere else on a node selects the node.
    var toggle = e.target.closest(".graph .toggle-link");
    var node = e.target.closest(".graph [data-node-id]");
    if (toggle && node) { e.preventDefault(); go(node.getAttribute("data-toggle-href"), toggle, e); return; }
    if (node) { e.preventDefault(); go(node.getAttribute("data-href"), node, e); }
  });

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var node = t.closest && t.closest(".graph [data-node-id]");
    if (node && t === node && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault(); go(node.getAttribute("data-href"), node, e); return;
    }
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
      if (link && link.hasAttribute("href")) { e.preventDefault(); link.click(); }
      return;
    }
    if (e.key === "o" || e.key === "O") {
      var ov = document.getElementById("overview-toggle");
      if (ov) { e.preventDefault(); ov.click(); }
      return;
    }
    if (!panzoom) return;
    if (e.key === "+" || e.key === "=") { e.preventDefault(); panzoom.zoomIn(); }
    else if (e.key === "-" || e.key === "_") { e.preventDefault(); panzoom.zoomOut(); }
    else if (e.key === "0") { e.preventDefault(); panzoom.reset(); }
  });

  // Keyboard focus can land on a node outside the frame: pan it into view, so focus is
  // never hidden. Only for keyboard focus (:focus-visible): moving a node under a pressed
  // mouse would turn its click into a miss. The frame itself never scrolls.
  function reveal(node) {
    var frame = document.querySelector(".graph-frame");
    if (!frame || !panzoom || !node.isConnected) return;
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

  // -- across a swap: the camera (focus and scroll: landing.js) ---------------------------

  function remember() {
    var frame = document.querySelector(".graph-frame");
    var content = document.querySelector(".view-content");
    previous.camera = frame ? parseNumbers(frame.getAttribute("data-fitted")) : null;
    previous.camera = previous.camera ? { x: previous.camera[0], y: previous.camera[1], z: previous.camera[2] } : null;
    previous.step = content ? content.getAttribute("data-step-id") : null;
    previous.pan = panzoom ? { pan: panzoom.getPan(), scale: panzoom.getScale() } : null;
    previous.base = base;
  }

  function afterSwap(target) {
    var content = document.querySelector(".view-content");
    if (!content) return;
    if (target && target.id === "view") {
      var stepChanged = previous.step !== content.getAttribute("data-step-id");
      // Same step (a module opened, a node selected, parameters changed): keep the user's
      // camera, pan and zoom, or the module they just opened would jump out of the frame.
      if (stepChanged) setupGraph(null, previous.camera);
      else {
        base = previous.base || fitCamera();
        var frame = document.querySelector(".graph-frame");
        if (frame && base) frame.setAttribute("data-fitted", [base.x, base.y, base.z].join(","));
        setupPanzoom(previous.pan);
        setCamera(base);
        afterMove();
      }
      document.title = content.getAttribute("data-title") || document.title;
      var announcer = document.getElementById("announcer");
      var selected = document.querySelector("[data-node-title]");
      if (announcer) announcer.textContent = stepChanged ? content.getAttribute("data-announce")
        : (selected ? "Inspector: " + selected.getAttribute("data-node-title") : "");
    }
  }

  // A figure that scrolls sideways inside itself (a phone: the training-path figures keep
  // their natural size so their text stays >= 11px) must be reachable by keyboard, or its
  // right part cannot be scrolled to without a pointer.
  function scrollableFigures() {
    document.querySelectorAll(".process-figure, .chart-scroll").forEach(function (fig) {
      var scrolls = fig.scrollWidth > fig.clientWidth + 1;
      fig.classList.toggle("scrolls", scrolls);
      if (scrolls && !fig.hasAttribute("tabindex")) {
        var title = fig.querySelector("svg title, figcaption");
        fig.setAttribute("tabindex", "0");
        fig.setAttribute("role", "region");
        fig.setAttribute("aria-label", (title ? title.textContent.trim().slice(0, 120) : "Figure") + " (scrolls sideways)");
      } else if (!scrolls && fig.getAttribute("role") === "region") {
        ["tabindex", "role", "aria-label"].forEach(function (a) { fig.removeAttribute(a); });
      }
    });
  }

  // htmx keeps a copy of the page's HTML for Back/Forward. Panzoom's inline styles must
  // not go into it: restoring them as style attributes is refused by the CSP. Strip them
  // while htmx copies the page (synchronously, right after this event), then put them back.
  document.addEventListener("htmx:beforeHistorySave", function () {
    var styled = Array.prototype.slice.call(document.querySelectorAll(".graph-frame [style], .graph-frame[style], .graph[style]"));
    var saved = styled.map(function (el) { return el.style.cssText; });
    styled.forEach(function (el) { el.removeAttribute("style"); });
    queueMicrotask(function () {
      styled.forEach(function (el, i) { if (el.isConnected) el.style.cssText = saved[i]; });
    });
  });

  // Back/Forward put an earlier copy of the page back: fit and bind it afresh.
  document.addEventListener("htmx:historyRestore", function () {
    var g = document.getElementById("camera");
    if (g) g.removeAttribute("data-moving");
    setupGraph();
  });

  // A new frame size (rotation, window resize): fit the step's camera to it again.
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      base = fitCamera();
      setCamera(base);
      if (panzoom) panzoom.reset({ animate: false });
      afterMove();
      scrollableFigures();
    }, 120);
  });

  document.addEventListener("htmx:beforeSwap", remember);
  document.addEventListener("htmx:afterSwap", function (e) { afterSwap(e.detail.target); scrollableFigures(); });
  reducedMotion.addEventListener && reducedMotion.addEventListener("change", function () { setupPanzoom(); });
  // In the first animation frame, not in DOMContentLoaded itself: the fit reads the frame's
  // size, which forces a layout; in a frame callback that layout is the one the first paint
  // needs anyway (and the graph is never painted unfitted), while DOMContentLoaded ends sooner.
  document.addEventListener("DOMContentLoaded", function () {
    requestAnimationFrame(function () { setupGraph(); scrollableFigures(); });
  });
})();
