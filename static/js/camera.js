// The camera rule (docs/design.md §2, "Fitting a saved camera"): pure functions, no DOM,
// so the browser tests can call them on made-up frames and boxes (window.GRPOCamera).
(function (root) {
  "use strict";

  var LABEL_PX = 13;        // .graph .label font-size, in world units
  var DETAIL_PX = 11;       // .graph .op and .shape, the smallest text in a node
  var READABLE_PX = 11;     // the smallest text the fit aims for on any screen
  var READABLE_ZOOM = READABLE_PX / DETAIL_PX;   // a step's camera never goes farther out
  var STEP_ZOOM = 1.25;     // nor closer in (app/views/graph.py: the same rule without script)

  // The step's camera (docs/design.md §2, "Graph layout"): the layout is dot's, so the
  // export's saved camera (framed for its author's layout) is not used. need: world boxes that
  // must end up whole inside the frame (the selection, open modules not holding it); context:
  // those plus their direct neighbours. frame: {width, height}. Returns {x, y, z} in frame
  // pixels (screen = world * z + (x, y)).
  //  1. Zoom: the largest up to STEP_ZOOM that holds the context, but never below
  //     READABLE_ZOOM, where 11-unit text is 11 px: no step opens with unreadable text.
  //  2. Centre the context; 3. move the least that keeps the needed boxes whole (if even
  //     they do not fit, their top-left shows); what is left out can be panned to.
  function fit(need, context, frame, opts) {
    opts = opts || {};
    var fw = frame.width, fh = frame.height;
    var margin = opts.margin != null ? opts.margin : Math.min(24, 0.06 * Math.min(fw, fh));
    var ctx = union(context) || union(need);
    if (!ctx) return { x: 0, y: 0, z: READABLE_ZOOM };
    var z = Math.min(opts.maxZoom || STEP_ZOOM, (fw - 2 * margin) / Math.max(ctx.width, 1),
                     (fh - 2 * margin) / Math.max(ctx.height, 1));
    z = Math.max(z, READABLE_ZOOM);
    var x = fw / 2 - (ctx.x + ctx.width / 2) * z;
    var y = fh / 2 - (ctx.y + ctx.height / 2) * z;
    var box = union(need);
    if (box) {
      x += shift(box.x * z + x, (box.x + box.width) * z + x, margin, fw - margin);
      y += shift(box.y * z + y, (box.y + box.height) * z + y, margin, fh - margin);
    }
    return { x: x, y: y, z: z };
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
