// Where the reader lands after an htmx swap: ONE rule for every swap of every page, however the
// swap was started (a link, a form, a node click through htmx.ajax, a poll).
//
// The landing element L is, in this order:
//   1. what the control asked for: the selector in data-land on the control or its nearest
//      ancestor that has one (e.g. "Compare with TRL's defaults" names #compare);
//   2. else the control itself, found again in the new page (its id, its node, its named data
//      attribute): a node selection lands on the node, a metric tab on that tab;
//   3. else what the swap's target names in data-land-default (the whole view: the step);
//   4. else the swapped part itself (a panel that polled and swapped itself in).
// Scroll: a named landing (1, 3) comes into view at its top when its top is not on screen; the
// control or the swapped part (2, 4) stays where it was on screen, so nothing above it can move
// the reader's place. A control inside an element with data-land-also (the graph's frame names the
// Inspector's heading) that lands on itself (2) also brings that element into view, scrolling no
// further than keeps the holder's top on screen (the whole graph, where it fits), or, where the
// holder's top is already above the screen, the control: a node's values are where its click shows.
// Focus: on the control used when it is still there and on screen or inside L, else on L. A swap
// nobody asked for (a poll: no event started it) neither scrolls nor takes focus; only focus that
// was inside the swapped part, and went with it, moves to its replacement.
(function () {
  "use strict";

  var pending = new WeakMap();   // the request's xhr -> what was on screen just before its swap

  // How to find "the same control" in the new page: its node in the graph, its id, or the data
  // attribute that names what it stands for (a training path, a stage, a sample).
  function keyOf(el) {
    if (!el || el === document.body || !el.closest) return null;
    var node = el.closest(".graph [data-node-id]");
    if (node) {
      var sel = '.graph [data-node-id="' + CSS.escape(node.getAttribute("data-node-id")) + '"]';
      return el.closest(".toggle-link") ? sel + " .toggle-link" : sel;
    }
    if (el.id) return "#" + CSS.escape(el.id);
    var named = ["data-stage-id", "data-process-id", "data-sample"];
    for (var i = 0; i < named.length; i++) {
      var v = el.getAttribute(named[i]);
      if (v !== null) {
        var scope = el.parentElement && el.parentElement.closest("[id]");
        return (scope ? "#" + CSS.escape(scope.id) + " " : "") + el.tagName.toLowerCase()
          + "[" + named[i] + '="' + CSS.escape(v) + '"]';
      }
    }
    return null;
  }

  function find(selector) {
    try { return selector ? document.querySelector(selector) : null; } catch (e) { return null; }
  }

  function onScreen(el) {
    var r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight && r.right > 0 && r.left < window.innerWidth;
  }

  function focusable(el) {
    if (el.matches("a[href], button, input, select, textarea, summary, [tabindex]")) return el;
    el.setAttribute("tabindex", "-1");   // a section that is landed on, not a Tab stop
    return el;
  }

  function topOf(selector) {
    var el = find(selector);
    return el ? el.getBoundingClientRect().top : null;
  }

  document.addEventListener("htmx:beforeSwap", function (e) {
    var d = e.detail || {}, cfg = d.requestConfig || {};
    var from = cfg.elt || d.elt, target = d.target;
    if (!d.xhr || !target || !d.shouldSwap) return;   // an error response keeps the page as it is
    document.documentElement.setAttribute("data-landing", "");
    var named = from && from.closest ? from.closest("[data-land]") : null;
    var also = from && from.closest ? from.closest("[data-land-also]") : null;
    var fromKey = from && from !== target ? keyOf(from) : null;
    var targetKey = target.id ? "#" + CSS.escape(target.id) : null;
    var active = document.activeElement;
    pending.set(d.xhr, {
      asked: !!cfg.triggeringEvent,
      land: named ? named.getAttribute("data-land") : null,
      also: also ? also.getAttribute("data-land-also") : null,
      fromKey: fromKey, fromTop: topOf(fromKey),
      targetKey: targetKey, targetTop: topOf(targetKey),
      landDefault: target.getAttribute("data-land-default"),
      focusKey: keyOf(active),
      focusInside: !!(active && active !== document.body && target.contains(active)),
    });
  });

  // Scroll by how far el moved on screen since the swap began: it is back where it was.
  function keepPlace(el, topBefore) {
    if (el && topBefore !== null) window.scrollBy(0, el.getBoundingClientRect().top - topBefore);
  }

  // The control's data-land-also element comes up into view (its top at least `room` px above the
  // screen's bottom), as far as the holder's top (else the control's) stays on screen.
  function showAlso(el, control) {
    if (!el || !control) return;
    var room = Math.min(120, window.innerHeight / 4);
    var need = el.getBoundingClientRect().top - (window.innerHeight - room);
    if (need <= 0) return;
    var holder = control.closest("[data-land-also]");
    var top = holder ? holder.getBoundingClientRect().top : -1;
    var limit = top >= 0 ? top : control.getBoundingClientRect().top - 8;
    var by = Math.min(need, limit);
    if (by > 0) window.scrollBy(0, by);
  }

  function land(d) {
    // A settle without a request (htmx's history restore) has no xhr: nothing was asked for.
    var was = d && d.xhr && pending.get(d.xhr);
    if (!was) return;
    pending.delete(d.xhr);
    var part = find(was.targetKey) || (d.target && d.target.isConnected ? d.target : null);
    var L = null, named = false;
    if ((L = find(was.land))) named = true;
    else if ((L = find(was.fromKey))) {
      keepPlace(was.asked ? L : null, was.fromTop);
      if (was.asked && was.also) showAlso(find(was.also), L);
    }
    else if ((L = find(was.landDefault))) named = true;
    else if ((L = part)) keepPlace(part, was.targetTop);
    if (!L) return;
    // A form that came back with errors: its first invalid field is what needs the reader.
    var invalid = part && part.querySelector('[aria-invalid="true"]');
    if (invalid) { L = invalid; named = true; }
    if (named && was.asked) {
      var top = L.getBoundingClientRect().top;
      if (top < 0 || top > window.innerHeight - 40) window.scrollBy(0, top - 8);
    }

    var active = document.activeElement;
    var lost = !active || active === document.body || !active.isConnected;
    if (!was.asked && !(was.focusInside && lost)) return;
    var control = invalid ? null : find(was.focusKey);
    var to = control && (L.contains(control) || onScreen(control)) ? control : focusable(L);
    if (document.activeElement !== to) to.focus({ preventScroll: true });
  }

  // After the settle (htmx has settled the new elements' attributes), in the next frame: by then the
  // graph's pan and zoom are back (app.js binds Panzoom on afterSwap, and Panzoom applies its start
  // position in a timeout), so a node is measured where it will stay. One settle event per swapped
  // element: the first one lands. <html data-landing> marks a landing still to come (tests wait on it).
  // A swap that failed settles nothing: no landing is to come.
  document.addEventListener("htmx:swapError", function () { document.documentElement.removeAttribute("data-landing"); });
  document.addEventListener("htmx:afterSettle", function (e) {
    var d = e.detail;
    requestAnimationFrame(function () {
      setTimeout(function () {
        land(d);
        if (!document.querySelector(".htmx-request")) document.documentElement.removeAttribute("data-landing");
      }, 0);
    });
  });
})();
