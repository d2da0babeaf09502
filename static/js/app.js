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

  // A node's box for the fit: its rect, with its note's when it has one. Not the text's own extent: that changes as fonts load, and the same URL
  // must always get the same camera.
  function nodeBox(svg, id) {
    var g = svg.querySelector('.graph [data-node-id="' + CSS.escape(id) + '"]');
    if (!g) return null;
    var b = rectBox(g.querySelector(":scope > rect"));
    // a note on the node (the rewards beside the advantages) is framed with it; a shape warning is
    // inside the box (app/views/graph.py)
    var note = svg.querySelector('.notes [data-note-for="' + CSS.escape(id) + '"] > rect');
    return note ? GRPOCamera.union([b, rectBox(note)]) : b;
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
      // the open modules holding the step's nodes join them when all fit even at the closest zoom
      // (app/views/graph_camera.py with_holders: the same rule without script)
      var holders = boxes(JSON.parse(svg.getAttribute("data-holders") || "[]"));
      var both = GRPOCamera.union(need.concat(holders)), m = Math.min(24, 0.06 * Math.min(size.width, size.height));
      if (holders.length && both && both.width * GRPOCamera.STEP_ZOOM <= size.width - 2 * m
          && both.height * GRPOCamera.STEP_ZOOM <= size.height - 2 * m) need = need.concat(holders);
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
    var f = frame.getBoundingClientRect(), seen = {}, placed = [], omitted = [];
    // Nodes and notes in the frame are obstacles too: a tag must not hide a label.
    // An open module is a frame, not a label: only its header's text and ± are obstacles.
    frame.querySelectorAll(".graph .node:not(.container) > rect:first-of-type, .graph .node.container > a, "
                           + ".graph .node.container > text, .graph .annotation-box").forEach(function (el) {
      var r = el.getBoundingClientRect();
      if (r.width && r.right > f.left && r.left < f.right && r.bottom > f.top && r.top < f.bottom)
        placed.push({ left: r.left - f.left, top: r.top - f.top, w: r.width, h: r.height, obstacle: true });
    });
    function inside(p) { return p.x >= f.left && p.x <= f.right && p.y >= f.top && p.y <= f.bottom; }
    // Every edge's course in the frame (points every ~6 px): a tag sits beside the edge it
    // names and on no edge at all, so it never hides where a line goes.
    var courses = [];
    document.querySelectorAll(".graph .edge").forEach(function (path) {
      var m = path.getScreenCTM(), len = path.getTotalLength();
      var n = Math.min(400, Math.max(8, Math.ceil(len * m.a / 6)));
      for (var i = 0; i <= n; i++) {
        var q = path.getPointAtLength(i / n * len);
        var p = { x: m.a * q.x + m.c * q.y + m.e, y: m.b * q.x + m.d * q.y + m.f };
        if (inside(p)) courses.push({ x: p.x - f.left, y: p.y - f.top });
      }
    });
    // What a tag at (left, top) would cover: another tag, a node or a note (1000 each), and
    // each point of an edge's course (1 each); off the frame is never allowed.
    function cost(left, top, w, h, enough) {
      if (left < 2 || top < 2 || left + w > f.width - 2 || top + h > f.height - 2) return Infinity;
      var PAD = 3, c = 0;
      for (var i = 0; i < placed.length; i++) {
        var p = placed[i];
        if (left < p.left + p.w && p.left < left + w && top < p.top + p.h && p.top < top + h) c += 1000;
      }
      if (c >= enough) return c;
      for (var j = 0; j < courses.length; j++) {
        var q = courses[j];
        if (q.x > left - PAD && q.x < left + w + PAD && q.y > top - PAD && q.y < top + h + PAD && ++c >= enough) return c;
      }
      return c;
    }
    // Where a tag goes: beside its edge's exit point (x, y, frame px), on the frame's side the
    // edge leaves by, the nearer free place along that side first, then a row further in; where
    // nothing is free, the place that covers least.
    function placeTag(x, y, w, h) {
      var side = [[y, "top"], [f.height - y, "bottom"], [x, "left"], [f.width - x, "right"]]
        .sort(function (a, b) { return a[0] - b[0]; })[0][1];
      var GAP = 6, along = side === "top" || side === "bottom", best = null, bestCost = Infinity;
      var starts = along ? [x + GAP, x - w - GAP] : [y + GAP, y - h - GAP];
      var reach = along ? f.width : f.height;
      for (var row = 0; row < 6; row++) {
        var inset = 2 + row * ((along ? h : w) + 4);
        var fixed = side === "top" ? inset : side === "bottom" ? f.height - h - inset
          : side === "left" ? inset : f.width - w - inset;
        for (var d = 0; d <= reach; d += 6) {
          for (var k = 0; k < 2; k++) {
            var a = starts[k] + (k === 0 ? d : -d);
            var spot = along ? { left: a, top: fixed } : { left: fixed, top: a };
            var c = cost(spot.left, spot.top, w, h, bestCost);
            spot.cost = c;
            if (c === 0) return spot;
            if (c < bestCost) { best = spot; bestCost = c; }
          }
        }
      }
      return best || { left: Math.max(2, Math.min(f.width - w - 2, x - w / 2)), top: Math.max(2, Math.min(f.height - h - 2, y - h / 2)),
                       cost: Infinity };
    }
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
      var spot = placeTag(last.x - f.left, last.y - f.top, w, h);
      if (spot.cost > 0 && tag.textContent.length > 16) {
        // Nowhere free for the whole name (a phone's crowded edge): a shorter tag, the name in its title.
        tag.title = tag.textContent;
        tag.textContent = tag.textContent.slice(0, 14).trim() + "…";
        w = tag.offsetWidth;
        var shorter = placeTag(last.x - f.left, last.y - f.top, w, h);
        if (shorter.cost < spot.cost) spot = shorter;
        else { tag.textContent = tag.title; tag.removeAttribute("title"); w = tag.offsetWidth; }
      }
      // Still on another edge or a label: left out, as a tag that hides a line misleads more than
      // none (the edge stays, faded; the Inspector names both ends).
      if (spot.cost > 0) { omitted.push(tag.title || tag.textContent); layer.removeChild(tag); return; }
      placed.push({ left: spot.left, top: spot.top, w: w, h: h });
      tag.style.left = spot.left + "px";
      tag.style.top = spot.top + "px";
    });
    frame.setAttribute("data-tags-omitted", JSON.stringify(omitted));  // said, for tests and debugging
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
    if (frame) frame.removeAttribute("data-panning");   // a swapped-out target's transition never ends
    if (!target || typeof Panzoom === "undefined") return;
    start = start && start.pan ? start : { pan: { x: 0, y: 0 }, scale: 1 };
    // canvas: a drag anywhere in the frame pans. The pan target's own box can lie outside
    // the frame (its drawing overflows it, translated there), so a drag on the frame's blank
    // part would otherwise reach nothing (at 390 px the whole box sat left of the frame).
    panzoom = Panzoom(target, { maxScale: 8, minScale: 0.2, step: 0.2, cursor: "grab", canvas: true,
                                animate: !reducedMotion.matches, duration: 200,
                                startX: start.pan.x, startY: start.pan.y, startScale: start.scale });
    target.parentElement.addEventListener("wheel", function (e) {
      if (!e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); panzoom.zoomWithWheel(e); }
    }, { passive: false });
    target.addEventListener("panzoomchange", afterMove);
    // An animated zoom (the buttons, the keys) moves the boxes by a CSS transition: the
    // tags placed at its first frame would use its first frame's boxes. Place them again once
    // it ends; data-panning says one runs (the browser tests wait for it to clear).
    target.addEventListener("transitionrun", function (e) {
      if (e.target === target) frame.setAttribute("data-panning", "");
    });
    ["transitionend", "transitioncancel"].forEach(function (type) {
      target.addEventListener(type, function (e) {
        if (e.target !== target) return;
        semanticZoom(); edgeTags();
        frame.removeAttribute("data-panning");
      });
    });
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

  // The key O changes the graph wherever the reader is on the page: its stage (toolbar and frame) comes
  // into view first, so the change is seen; the swap then keeps the toggle, and so the graph, where it
  // is (landing.js).
  function showGraph() {
    var stage = document.getElementById("graph-stage");
    if (!stage) return;
    var r = stage.getBoundingClientRect();
    if (r.top >= 0 && r.bottom <= window.innerHeight) return;
    stage.scrollIntoView({ block: r.height <= window.innerHeight ? "nearest" : "start" });
  }

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
      if (ov) { e.preventDefault(); showGraph(); ov.click(); }
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

  // htmx keeps a copy of the page's HTML for Back/Forward. No style attribute may go into it
  // (Panzoom's, the edge tags' places, one an extension or a test tool left on a control):
  // restoring them as style attributes is refused by the CSP. Strip them while htmx copies the
  // page (synchronously, right after this event), then put them back. (A swap's settle copies
  // none either: base.html leaves "style" out of htmx's attributesToSettle.)
  document.addEventListener("htmx:beforeHistorySave", function () {
    var styled = Array.prototype.slice.call(document.body.querySelectorAll("[style]"));
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

  // -- a part of the view swapped in place (a figure's control): the rest of its links follow ----
  // The server answers a change at a figure with that figure alone and HX-Replace-Url, the page's
  // new address. Every other link in the view that carried the page's state (the graph's nodes and
  // ±, Overview, Compare, the paths panel) still holds the old value: clicking one would undo the
  // change. Such a link (one whose query holds every key of the old address but the view's own,
  // node, expanded and view, at the old value) gets the changed keys; a link that sets a value of
  // its own (a preset, a case) is left as it is.
  var VIEW_KEYS = { node: 1, expanded: 1, view: 1 };
  var pageUrl = location.href;
  function carried(link, before) {
    var ok = true;
    before.forEach(function (value, key) { if (!VIEW_KEYS[key] && link.searchParams.get(key) !== value) ok = false; });
    return ok;
  }
  function followUrl(oldUrl, newUrl) {
    var before = new URL(oldUrl, location.href), after = new URL(newUrl, location.href);
    var changed = [];
    before.searchParams.forEach(function (v, k) { if (!VIEW_KEYS[k] && after.searchParams.get(k) !== v) changed.push(k); });
    after.searchParams.forEach(function (v, k) { if (!VIEW_KEYS[k] && before.searchParams.get(k) !== v && changed.indexOf(k) < 0) changed.push(k); });
    if (!changed.length) return;
    var view = document.getElementById("view") || document.body;
    view.querySelectorAll("a[href], [data-href], [data-toggle-href]").forEach(function (el) {
      ["href", "data-href", "data-toggle-href"].forEach(function (attr) {
        var raw = el.getAttribute(attr);
        if (!raw || raw.charAt(0) !== "/") return;
        var link = new URL(raw, location.href);
        if (link.pathname.split("/")[2] !== before.pathname.split("/")[2] || !carried(link, before.searchParams)) return;
        changed.forEach(function (k) {
          if (after.searchParams.has(k)) link.searchParams.set(k, after.searchParams.get(k)); else link.searchParams.delete(k);
        });
        el.setAttribute(attr, link.pathname + link.search + link.hash);
      });
    });
  }
  document.addEventListener("htmx:afterSettle", function (e) {
    var detail = e.detail || {}, xhr = detail.xhr, target = detail.target;  // some are triggered by hand, bare
    var replaced = xhr && xhr.getResponseHeader("HX-Replace-Url");
    if (replaced && target && target.id !== "view") followUrl(pageUrl, replaced);
    pageUrl = replaced ? new URL(replaced, location.href).href : location.href;
  });
  window.addEventListener("popstate", function () { pageUrl = location.href; });

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
