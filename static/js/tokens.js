/* The token view's keyboard: one Tab stop per completion (a roving tabindex: the
   completion's current token has tabindex 0, its others -1). Inside a completion ArrowLeft and
   ArrowRight move between tokens, Home and End to its first and last; ArrowUp and ArrowDown move
   to the same position in the previous or next completion. Any [data-roving] group of links (the
   metric tabs) is one Tab stop the same way. Listeners sit on the document, so they survive htmx
   swaps of #view; no inline code, nothing evaluated. Also marks a table box that scrolls sideways
   (the CSS draws its cue). */
(function () {
  "use strict";
  if (window.tokenKeysInstalled) { return; }
  window.tokenKeysInstalled = true;

  function items(group, selector) {
    return Array.prototype.filter.call(group.children, function (el) { return el.matches(selector); });
  }

  function makeCurrent(el, siblings) {
    siblings.forEach(function (s) { s.setAttribute("tabindex", s === el ? "0" : "-1"); });
  }

  function tokenTarget(tok, key) {
    var list = tok.parentNode;
    var toks = items(list, ".tok");
    var i = toks.indexOf(tok);
    if (key === "ArrowLeft") { return toks[Math.max(0, i - 1)]; }
    if (key === "ArrowRight") { return toks[Math.min(toks.length - 1, i + 1)]; }
    if (key === "Home") { return toks[0]; }
    if (key === "End") { return toks[toks.length - 1]; }
    if (key === "ArrowUp" || key === "ArrowDown") {
      var view = tok.closest(".completions");
      if (!view) { return null; }
      var lists = Array.prototype.slice.call(view.querySelectorAll(".tokens"));
      var j = lists.indexOf(list) + (key === "ArrowUp" ? -1 : 1);
      if (j < 0 || j >= lists.length) { return null; }
      var other = items(lists[j], ".tok");
      return other[Math.min(i, other.length - 1)] || null;
    }
    return null;
  }

  function rovingTarget(el, key) {
    var links = items(el.parentNode, "a, button");
    var i = links.indexOf(el);
    if (key === "ArrowLeft" || key === "ArrowUp") { return links[Math.max(0, i - 1)]; }
    if (key === "ArrowRight" || key === "ArrowDown") { return links[Math.min(links.length - 1, i + 1)]; }
    if (key === "Home") { return links[0]; }
    if (key === "End") { return links[links.length - 1]; }
    return null;
  }

  var KEYS = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"];

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || KEYS.indexOf(e.key) < 0 || !e.target.closest) { return; }
    var tok = e.target.closest(".tokens > .tok");
    var target = null;
    if (tok) {
      target = tokenTarget(tok, e.key);
    } else {
      var member = e.target.closest("[data-roving] > a, [data-roving] > button");
      if (member) { target = rovingTarget(member, e.key); }
    }
    if (!tok && !target) { return; }
    // Ours alone: app.js reads ArrowLeft and ArrowRight on the page as previous and next step.
    // This listener runs in the capture phase, so it comes first and the page's never sees the key.
    e.preventDefault();
    e.stopPropagation();
    if (target && target !== e.target) { target.focus(); }
  }, true);

  // A card hangs under its token, from its left edge; near the right edge of the screen it is
  // hung from the token's right edge instead, and near the bottom it stands above the token, so
  // that it stays whole on screen. On a phone the CSS docks every card to the bottom of the
  // screen: there the page scrolls so that the card does not cover its own token.
  function placeCard(tok, focused) {
    var card = tok.querySelector(".tok-card");
    if (!card) { return; }
    tok.classList.remove("card-from-right", "card-above");
    var style = getComputedStyle(card);
    if (style.display === "none") { return; }
    var box = card.getBoundingClientRect();
    if (style.position === "fixed") {  // docked: on focus, the page scrolls the token out from under it
      var under = tok.getBoundingClientRect().bottom + 8 - box.top;
      if (focused && under > 0) { window.scrollBy(0, under); }
      return;
    }
    if (box.right > document.documentElement.clientWidth - 4) { tok.classList.add("card-from-right"); }
    // too low to hang below: it stands on the token if there is room above, else on focus the
    // page scrolls up until it fits
    var low = box.bottom - (window.innerHeight - 4);
    if (low > 0) {
      if (tok.getBoundingClientRect().top - box.height > 4) { tok.classList.add("card-above"); }
      else if (focused) { window.scrollBy(0, low + 4); }
    }
  }
  document.addEventListener("mouseover", function (e) {
    var tok = e.target.closest && e.target.closest(".tokens > .tok");
    if (tok) { placeCard(tok, false); }
  });

  // Whatever focused a token or a tab (keys, a click, a script), it becomes its group's Tab stop.
  document.addEventListener("focusin", function (e) {
    if (!e.target.closest) { return; }
    var tok = e.target.closest(".tokens > .tok");
    if (tok) { makeCurrent(tok, items(tok.parentNode, ".tok")); placeCard(tok, true); return; }
    var member = e.target.closest("[data-roving] > a, [data-roving] > button");
    if (member) { makeCurrent(member, items(member.parentNode, "a, button")); }
  });

  function markScrollers() {
    // a strip choice that scrolls sideways (phone) shows its current tab
    document.querySelectorAll(".token-panel .metric-tabs").forEach(function (nav) {
      var current = nav.querySelector('[aria-current="true"]');
      if (current && nav.scrollWidth > nav.clientWidth) {
        nav.scrollLeft = Math.max(0, current.offsetLeft - nav.offsetLeft - nav.clientWidth / 2);
      }
    });
    document.querySelectorAll(".token-panel .table-scroll").forEach(function (box) {
      box.classList.toggle("scrolls-x", box.scrollWidth > box.clientWidth + 1);
    });
  }
  document.addEventListener("DOMContentLoaded", markScrollers);
  document.addEventListener("htmx:afterSettle", markScrollers);
  window.addEventListener("resize", markScrollers);
  if (document.readyState !== "loading") { markScrollers(); }
})();
