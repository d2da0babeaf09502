// The camera rule (docs/design.md §2, "Fitting a saved camera"): pure functions, no DOM,
// so the browser tests can call them on made-up frames and boxes (window.GRPOCamera).
(function (root) {
  "use strict";

  var LABEL_PX = 13;        // .graph .label font-size, in world units
  var DETAIL_PX = 11;       // .graph .op and .shape, the smallest text in a node
  var READABLE_PX = 11;     // the smallest text the fit aims for on any screen
  var READABLE_ZOOM = READABLE_PX / DETAIL_PX;   // a step's camera never goes farther out
  var STEP_ZOOM = 1.25;     // nor closer in (app/views/graph.py: the same rule without script)
  var EDGE = 18;            // the least room a needed box keeps from the frame's edge (app.js's reveal pans closer than 16)
  var SLACK = 2;            // a box is wholly in (or out) with its outline: 2 px clear of the frame's edge

  // The step's camera (docs/design.md §2, "Graph layout"): the layout is dot's, so the
  // export's saved camera (framed for its author's layout) is not used. need: world boxes that
  // must end up whole inside the frame (the selection, open modules not holding it); context:
  // those plus their direct neighbours. frame: {width, height}. Returns {x, y, z} in frame
  // pixels (screen = world * z + (x, y)). opts (read from the page's graph when not given,
  // stepInputs): wanted, avoid, top, margin.
  //  0. Wanted boxes (the step's open modules: the innermost's title, then all of it, then the
  //     next one out) join the needed ones, in order, while all of them (and the context, where
  //     it fits) still fit the frame at READABLE_ZOOM.
  //  1. Zoom: the largest up to STEP_ZOOM that holds the context and the needed boxes, but
  //     never below READABLE_ZOOM, where 11-unit text is 11 px: no step opens with unreadable text.
  //  2. Centre the context; 3. move the least that keeps the needed boxes whole (if even
  //     they do not fit, their top-left shows); what is left out can be panned to.
  //  4. Then move the least, keeping the needed boxes (and a context that was whole) whole, so
  //     that the frame's edge cuts no avoid box (a node, an open module's title, a note): each is
  //     wholly in or wholly out, the fewest cut where no place leaves all whole.
  //  top: pixels at the frame's top the boxes keep clear of (the frame's title strip).
  // app/views/graph_camera.py fit_camera is the same rule without script.
  function fit(need, context, frame, opts) {
    var page = !opts;
    opts = opts || stepInputs(frame);
    var top = opts.top || 0;
    if (top > 0 && top < frame.height) {
      var rest = { width: frame.width, height: frame.height - top };
      var below = fit(need, context, rest, { wanted: opts.wanted, avoid: opts.avoid, margin: opts.margin, maxZoom: opts.maxZoom });
      if (page) markCuts(below, rest, opts);
      return { x: below.x, y: below.y + top, z: below.z };
    }
    var fw = frame.width, fh = frame.height;
    var margin = opts.margin != null ? opts.margin : Math.min(24, 0.06 * Math.min(fw, fh));
    var room = { width: Math.max(fw - 2 * margin, 1), height: Math.max(fh - 2 * margin, 1) };
    need = (need || []).slice();
    (opts.wanted || []).forEach(function (w) {
      var u = union(need.concat([w]));
      if (u.width * READABLE_ZOOM <= room.width + 1e-9 && u.height * READABLE_ZOOM <= room.height + 1e-9) need.push(w);
    });
    var ctx = union(context) || union(need);
    if (!ctx) return { x: 0, y: 0, z: READABLE_ZOOM };
    var z0 = Math.min(opts.maxZoom || STEP_ZOOM, room.width / Math.max(ctx.width, 1), room.height / Math.max(ctx.height, 1));
    var box = union(need);
    if (box) z0 = Math.min(z0, room.width / Math.max(box.width, 1), room.height / Math.max(box.height, 1));
    z0 = Math.max(z0, READABLE_ZOOM);
    var avoid = opts.avoid && opts.avoid.length ? opts.avoid : null;
    var zooms = avoid ? zoomsFrom(z0, opts.maxZoom || STEP_ZOOM) : [z0];
    var best = null;
    // at the fitted zoom first, then others; the context kept whole where it was first, then not
    outer:
    for (var k = 0; k < 2; k++) {
      for (var i = 0; i < zooms.length; i++) {
        var z = zooms[i];
        var x = fw / 2 - (ctx.x + ctx.width / 2) * z;
        var y = fh / 2 - (ctx.y + ctx.height / 2) * z;
        if (box) {
          x += shift(box.x * z + x, (box.x + box.width) * z + x, margin, fw - margin);
          y += shift(box.y * z + y, (box.y + box.height) * z + y, margin, fh - margin);
        }
        var found = { cuts: 0, x: x, y: y };
        if (avoid) found = uncut(x, y, z, fw, fh, Math.min(margin, EDGE), box, k === 0 ? ctx : null, avoid);
        if (!best || found.cuts < best.cuts) best = { cuts: found.cuts, x: found.x, y: found.y, z: z };
        if (best.cuts === 0 || !avoid) break outer;
      }
    }
    var camera = { x: best.x, y: best.y, z: best.z };
    if (page) markCuts(camera, frame, opts);
    return camera;
  }

  // The fitted zoom, then a few steps out to READABLE_ZOOM and in to the closest: where no position
  // leaves every box whole at z0, another zoom often does (a phone's frame is one box and two gaps wide).
  function zoomsFrom(z0, zMax) {
    var out = [z0], k;
    for (k = 1; k <= 4; k++) out.push(z0 - (z0 - READABLE_ZOOM) * k / 4);
    for (k = 1; k <= 5; k++) out.push(z0 + (zMax - z0) * k / 5);
    return out.filter(function (z, i) { return out.indexOf(z) === i; });
  }

  // The translations along one axis ("x" or "y") that keep the needed boxes inside the margins, and
  // the context too where `at` (the fitted one) has it inside; [at, at] when the needed boxes overflow.
  function allowed(at, z, size, margin, need, ctx, axis) {
    var dim = axis === "x" ? "width" : "height", lo = -Infinity, hi = Infinity;
    var pairs = [[need, true], [ctx, false]];
    for (var i = 0; i < pairs.length; i++) {
      var b = pairs[i][0], must = pairs[i][1];
      if (!b) continue;
      var low = margin - b[axis] * z, high = size - margin - (b[axis] + b[dim]) * z;
      if (low > high + 1e-9) { if (must) return [at, at]; continue; }
      if (must || (low - 1e-6 <= at && at <= high + 1e-6)) { lo = Math.max(lo, low); hi = Math.min(hi, high); }
    }
    return lo <= hi ? [Math.min(lo, at), Math.max(hi, at)] : [at, at];
  }

  // Per box at translation t along one axis: 0 wholly inside the frame, 1 across its edge, 2 wholly outside.
  function status(t, z, size, boxes, axis) {
    var dim = axis === "x" ? "width" : "height", out = new Uint8Array(boxes.length);
    for (var i = 0; i < boxes.length; i++) {
      var a = boxes[i][axis] * z + t, b = (boxes[i][axis] + boxes[i][dim]) * z + t;
      out[i] = b <= -SLACK || a >= size + SLACK ? 2 : (a < SLACK || b > size - SLACK ? 1 : 0);
    }
    return out;
  }

  function candidates(at, span, z, size, boxes, axis) {
    var dim = axis === "x" ? "width" : "height", seen = {}, out = [];
    function add(t) { if (t >= span[0] && t <= span[1] && !seen[t]) { seen[t] = true; out.push(t); } }
    add(at); add(span[0]); add(span[1]);
    boxes.forEach(function (b) {
      var a = b[axis] * z, e = (b[axis] + b[dim]) * z;
      var d = SLACK + 1;
      add(-a + d); add(-e - d); add(size - a + d); add(size - e - d);
    });
    return out.sort(function (p, q) { return Math.abs(p - at) - Math.abs(q - at); });
  }

  function uncut(x, y, z, fw, fh, margin, need, ctx, avoid) {
    var xs = allowed(x, z, fw, margin, need, ctx, "x"), ys = allowed(y, z, fh, margin, need, ctx, "y");
    var boxes = avoid.filter(function (b) {
      return (b.x + b.width) * z + xs[1] > 0 && b.x * z + xs[0] < fw && (b.y + b.height) * z + ys[1] > 0 && b.y * z + ys[0] < fh;
    });
    if (!boxes.length) return { cuts: 0, x: x, y: y };
    var cx = candidates(x, xs, z, fw, boxes, "x").map(function (t) { return { t: t, s: status(t, z, fw, boxes, "x") }; });
    var cy = candidates(y, ys, z, fh, boxes, "y").map(function (t) { return { t: t, s: status(t, z, fh, boxes, "y") }; });
    var best = { cuts: boxes.length + 1, far: Infinity, x: x, y: y };
    for (var i = 0; i < cx.length; i++) {
      if (best.cuts === 0 && Math.abs(cx[i].t - x) >= best.far) break;   // nearest first
      for (var j = 0; j < cy.length; j++) {
        var far = Math.hypot(cx[i].t - x, cy[j].t - y);
        if (best.cuts === 0 && far >= best.far) break;
        var sx = cx[i].s, sy = cy[j].s, cuts = 0;
        for (var k = 0; k < boxes.length && cuts <= best.cuts; k++)
          if ((sx[k] === 1 && sy[k] !== 2) || (sy[k] === 1 && sx[k] !== 2)) cuts++;
        if (cuts < best.cuts || (cuts === best.cuts && far < best.far)) best = { cuts: cuts, far: far, x: cx[i].t, y: cy[j].t };
      }
    }
    return best;
  }

  // Where the page's own camera still leaves a box across the frame's edge (no position at any zoom
  // left all whole: a phone's frame is narrow), that node or note is faded whole (data-cut, graph.css),
  // so no half-label reads as part of the view; the marks go as soon as the reader moves the view.
  function markCuts(camera, frame, opts) {
    var doc = root.document, svg = doc && doc.getElementById("graph");
    if (!svg) return;
    svg.querySelectorAll("[data-cut]").forEach(function (el) { el.removeAttribute("data-cut"); });
    (opts.owners || []).forEach(function (el, i) {
      var b = opts.avoid[i], fw = frame.width, fh = frame.height;
      var l = b.x * camera.z + camera.x, r = (b.x + b.width) * camera.z + camera.x;
      var t = b.y * camera.z + camera.y, d = (b.y + b.height) * camera.z + camera.y;
      var out = r <= -SLACK || l >= fw + SLACK || d <= -SLACK || t >= fh + SLACK;
      if (!out && (l < SLACK || r > fw - SLACK || t < SLACK || d > fh - SLACK)) el.setAttribute("data-cut", "");
    });
    var frameEl = svg.closest(".graph-frame");
    if (frameEl && !frameEl.hasAttribute("data-cut-watch")) {
      frameEl.setAttribute("data-cut-watch", "");
      var clear = function () {
        var g = doc.getElementById("graph");
        if (g) g.querySelectorAll("[data-cut]").forEach(function (el) { el.removeAttribute("data-cut"); });
      };
      ["pointerdown", "wheel", "keydown"].forEach(function (type) { frameEl.addEventListener(type, clear, true); });
      ["zoom-in", "zoom-out", "reset-view"].forEach(function (id) {
        var b = doc.getElementById(id); if (b) b.addEventListener("click", clear);
      });
    }
  }

  // What fit() reads from the page's graph when not given opts: the nodes' boxes (an open module's
  // title block, data-header, in place of its whole box) and notes as `avoid`; the step's open
  // modules as `wanted` (the SVG's data-wanted: [id, "header" | "box"], app/views/graph.py); and the
  // title strip's height as `top` (templates/partials/graph_titles.html).
  function stepInputs(frame) {
    var doc = root.document, svg = doc && doc.getElementById("graph");
    var frameEl = svg && svg.closest(".graph-frame");
    // only for the page's own frame (a fit of made-up boxes, as the browser tests do, is the pure rule)
    if (!frameEl || frameEl.clientWidth !== frame.width || frameEl.clientHeight !== frame.height) return {};
    function rect(el) {
      return el ? { x: +el.getAttribute("x"), y: +el.getAttribute("y"), width: +el.getAttribute("width"),
                    height: +el.getAttribute("height") } : null;
    }
    function header(g) {
      var v = (g.getAttribute("data-header") || "").split(" ").map(Number);
      return v.length === 4 && v.every(isFinite) ? { x: v[0], y: v[1], width: v[2], height: v[3] } : null;
    }
    var avoid = [], owners = [], wanted = [];
    svg.querySelectorAll(".node").forEach(function (g) {
      var b = g.classList.contains("container") ? header(g) : rect(g.querySelector(":scope > rect"));
      if (b) { avoid.push(b); owners.push(g); }
    });
    svg.querySelectorAll(".notes [data-note-for] > rect").forEach(function (r) { avoid.push(rect(r)); owners.push(r.parentElement); });
    var want = [];
    try { want = JSON.parse(svg.getAttribute("data-wanted") || "[]"); } catch (e) { want = []; }
    want.forEach(function (w) {
      var g = svg.querySelector('.node[data-node-id="' + CSS.escape(w[0]) + '"]');
      var b = g && (w[1] === "header" ? header(g) : rect(g.querySelector(":scope > rect")));
      if (b) wanted.push(b);
    });
    var strip = doc.querySelector(".graph-frame .graph-titles");
    var top = strip && strip.offsetHeight ? strip.offsetTop + strip.offsetHeight : 0;
    return { avoid: avoid, owners: owners, wanted: wanted, top: top };
  }

  // The whole graph in the frame (Overview): every box, centred, never past maxZoom, and never
  // below minZoom (where 13-unit labels are 11 px): what does not fit then is panned to, from
  // the top of the model (its inputs) and its middle across.
  function fitAll(boxes, frame, maxZoom, minZoom) {
    var box = union(boxes), fw = frame.width, fh = frame.height;
    if (!box) return { x: 0, y: 0, z: 1 };
    var margin = Math.min(24, 0.06 * Math.min(fw, fh));
    var z = Math.min(maxZoom || 1.25, (fw - 2 * margin) / Math.max(box.width, 1), (fh - 2 * margin) / Math.max(box.height, 1));
    if (minZoom) z = Math.max(z, minZoom);
    var x = (fw - box.width * z) / 2 - box.x * z;
    var y = box.height * z <= fh - 2 * margin ? (fh - box.height * z) / 2 - box.y * z : margin - box.y * z;
    return { x: x, y: y, z: z };
  }

  function shift(lo, hi, min, max) {
    if (hi - lo > max - min) return min - lo;   // cannot fit: keep its start in view
    if (lo < min) return min - lo;
    if (hi > max) return max - hi;
    return 0;
  }

  function union(boxes) {
    if (!boxes || !boxes.length) return null;
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    boxes.forEach(function (b) {
      x0 = Math.min(x0, b.x); y0 = Math.min(y0, b.y);
      x1 = Math.max(x1, b.x + b.width); y1 = Math.max(y1, b.y + b.height);
    });
    return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
  }

  root.GRPOCamera = { fit: fit, fitAll: fitAll, union: union, LABEL_PX: LABEL_PX, DETAIL_PX: DETAIL_PX,
                     READABLE_PX: READABLE_PX, READABLE_ZOOM: READABLE_ZOOM, STEP_ZOOM: STEP_ZOOM };
})(window);
