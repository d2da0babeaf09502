// The camera rule (docs/design.md §2, "Fitting a saved camera"): pure functions, no DOM,
// so the browser tests can call them on made-up frames and boxes (window.GRPOCamera).
(function (root) {
  "use strict";

  var LABEL_PX = 13;        // .graph .label font-size, in world units
  var DETAIL_PX = 11;       // .graph .op and .shape, the smallest text in a node
  var READABLE_PX = 11;     // the smallest text the fit aims for on any screen

  // camera: the author's {x, y, z} (screen = world * z + (x, y)) for a viewport vw x vh.
  // frame: {width, height} the browser really has. need: world boxes [{x, y, width, height}]
  // that must end up whole inside the frame (selected nodes, expanded modules).
  // Returns {x, y, z} in frame pixels.
  function fit(camera, viewport, frame, need, opts) {
    opts = opts || {};
    var fw = frame.width, fh = frame.height;
    var margin = opts.margin != null ? opts.margin : Math.min(24, 0.06 * Math.min(fw, fh));
    // 1. The saved viewport's region, scaled to fit the frame (never enlarged past the
    //    author's zoom: a bigger frame shows more around the region) and centred.
    var s = Math.min(1, fw / viewport.width, fh / viewport.height);
    var z = camera.z * s;
    var x = camera.x * s + (fw - viewport.width * s) / 2;
    var y = camera.y * s + (fh - viewport.height * s) / 2;
    var box = union(need);
    if (!box) return { x: x, y: y, z: z };
    // 2. Zoom: out if the boxes cannot fit at this zoom; in (up to the author's zoom)
    //    where a node's text would fall under READABLE_PX and the boxes leave room.
    var zFit = Math.min((fw - 2 * margin) / Math.max(box.width, 1), (fh - 2 * margin) / Math.max(box.height, 1));
    var zRead = Math.min(camera.z, READABLE_PX / DETAIL_PX);
    var z2 = Math.min(zFit, Math.max(z, zRead));
    if (opts.maxZoom != null) z2 = Math.min(z2, opts.maxZoom);
    if (z2 !== z) {  // about the frame's centre, so the author's framing moves least
      var cx = (fw / 2 - x) / z, cy = (fh / 2 - y) / z;
      x = fw / 2 - cx * z2; y = fh / 2 - cy * z2; z = z2;
    }
    // 3. Move the least that puts every box whole inside the frame, margin included.
    x += shift(box.x * z + x, (box.x + box.width) * z + x, margin, fw - margin);
    y += shift(box.y * z + y, (box.y + box.height) * z + y, margin, fh - margin);
    return { x: x, y: y, z: z };
  }

  // The whole graph in the frame (Overview): every box, centred, never past maxZoom.
  function fitAll(boxes, frame, maxZoom) {
    var box = union(boxes), fw = frame.width, fh = frame.height;
    if (!box) return { x: 0, y: 0, z: 1 };
    var margin = Math.min(24, 0.06 * Math.min(fw, fh));
    var z = Math.min(maxZoom || 1.25, (fw - 2 * margin) / Math.max(box.width, 1), (fh - 2 * margin) / Math.max(box.height, 1));
    return { x: (fw - box.width * z) / 2 - box.x * z, y: (fh - box.height * z) / 2 - box.y * z, z: z };
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

  root.GRPOCamera = { fit: fit, fitAll: fitAll, union: union, LABEL_PX: LABEL_PX, DETAIL_PX: DETAIL_PX, READABLE_PX: READABLE_PX };
})(window);
