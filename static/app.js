// Turnscope page behaviour: citation markers highlight their spans and show a source card;
// activating a marker focuses its source. Delegated, so live-inserted turns work too.
// Untrusted text only ever goes through textContent.
(function () {
  "use strict";

  var card = null;

  function turnOf(el) { return el.closest(".turn"); }

  function sourceItem(marker) {
    var href = marker.getAttribute("href") || "";
    if (href.charAt(0) !== "#") return null;
    return document.getElementById(decodeURIComponent(href.slice(1)));
  }

  function spansFor(turn, number) {
    var out = [];
    turn.querySelectorAll(".cite[data-sources]").forEach(function (span) {
      if (span.getAttribute("data-sources").split(" ").indexOf(number) !== -1) out.push(span);
    });
    return out;
  }

  function clearActive() {
    document.querySelectorAll(".cite.is-active, .sources li.is-active").forEach(function (el) {
      el.classList.remove("is-active");
    });
    if (card) card.hidden = true;
  }

  function ensureCard() {
    if (card) return card;
    card = document.createElement("div");
    card.className = "source-card";
    card.setAttribute("role", "tooltip");
    card.id = "source-card";
    card.hidden = true;
    document.body.appendChild(card);
    return card;
  }

  function showCard(marker, item) {
    var c = ensureCard();
    c.textContent = "";
    var title = document.createElement("div");
    title.className = "card-title";
    title.textContent = item.getAttribute("data-title") || item.getAttribute("data-url") || "Source";
    var domain = document.createElement("div");
    domain.className = "card-domain";
    domain.textContent = item.getAttribute("data-domain") || "";
    c.appendChild(title);
    c.appendChild(domain);
    var excerptText = item.getAttribute("data-excerpt");
    if (excerptText) {
      var excerpt = document.createElement("p");
      excerpt.className = "card-excerpt";
      excerpt.textContent = excerptText;
      c.appendChild(excerpt);
    }
    var rect = marker.getBoundingClientRect();
    c.hidden = false;
    var left = Math.min(window.scrollX + rect.left, window.scrollX + document.documentElement.clientWidth - c.offsetWidth - 8);
    c.style.left = Math.max(8, left) + "px";
    c.style.top = (window.scrollY + rect.bottom + 6) + "px";
  }

  function activate(marker) {
    clearActive();
    var turn = turnOf(marker);
    var number = marker.getAttribute("data-source");
    if (!turn || !number) return;
    spansFor(turn, number).forEach(function (span) { span.classList.add("is-active"); });
    var item = sourceItem(marker);
    if (item) {
      item.classList.add("is-active");
      showCard(marker, item);
    }
  }

  function isMarker(el) { return el && el.classList && el.classList.contains("cite-marker"); }

  document.addEventListener("mouseover", function (e) {
    var m = e.target.closest && e.target.closest(".cite-marker");
    if (m) activate(m);
  });
  document.addEventListener("mouseout", function (e) {
    var m = e.target.closest && e.target.closest(".cite-marker");
    if (m && document.activeElement !== m) clearActive();
  });
  document.addEventListener("focusin", function (e) {
    if (isMarker(e.target)) activate(e.target);
  });
  document.addEventListener("focusout", function (e) {
    if (isMarker(e.target)) clearActive();
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") clearActive();
  });
  document.addEventListener("click", function (e) {
    var m = e.target.closest && e.target.closest(".cite-marker");
    if (!m) return;
    var item = sourceItem(m);
    if (!item) return;
    e.preventDefault();
    clearActive();
    history.replaceState(null, "", "#" + item.id);
    item.focus();
    item.classList.add("is-active");
  });

  // -- long conversations: the page shows a window of turns --------------------------------

  // "Earlier turns" is a real link (the previous window, without script); with script it
  // fetches just those turns and puts them above the ones shown, keeping the reader's place.
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("[data-window-earlier] a[data-fragment]");
    if (!link || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    loadEarlier(link);
  });

  function loadEarlier(link) {
    var nav = link.closest("[data-window-earlier]");
    if (nav.getAttribute("aria-busy") === "true") return;
    nav.setAttribute("aria-busy", "true");
    fetch(link.getAttribute("data-fragment"), {
      credentials: "same-origin", headers: { "X-Requested-With": "fetch" }
    }).then(function (r) {
      if (!r.ok) throw new Error("turns " + r.status);
      return r.text();
    }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      var anchor = nav.nextElementSibling;
      var before = anchor ? anchor.getBoundingClientRect().top : 0;
      var inserted = [];
      Array.prototype.slice.call(doc.body.children).forEach(function (el) {
        var node = document.importNode(el, true);
        nav.parentNode.insertBefore(node, nav);
        if (node.matches("section.turn")) inserted.push(node);
      });
      nav.parentNode.removeChild(nav);
      var main = document.getElementById("conversation");
      if (main && inserted.length) main.dataset.windowFrom = inserted[0].dataset.index;
      if (anchor) window.scrollBy(0, anchor.getBoundingClientRect().top - before);
      // Focus the newest of the turns just loaded: the next Tab continues from there.
      var last = inserted[inserted.length - 1];
      if (last) {
        last.setAttribute("tabindex", "-1");
        last.focus({ preventScroll: false });
      }
      document.dispatchEvent(new CustomEvent("turnscope:turns-inserted"));
    }).catch(function () {
      nav.removeAttribute("aria-busy");
      window.location.href = link.href;  // the plain link still works
    });
  }

  // A link to a turn (#turn-<id>) or to one of its sources (#src-<id>-N) that this window does
  // not show: ask the server for the window that holds it.
  var DEEP = /^#(?:turn|src)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/;

  function followDeepLink() {
    var hash = location.hash;
    var m = DEEP.exec(hash);
    if (!m || !document.getElementById("conversation")) return;
    var id = decodeURIComponent(hash.slice(1));
    if (document.getElementById(id)) return;
    var params = new URLSearchParams(location.search);
    if (params.get("turn") === m[1]) return;  // asked already: not a turn of this conversation
    params.delete("from");
    params.set("turn", m[1]);
    location.replace(location.pathname + "?" + params.toString() + hash);
  }

  window.addEventListener("hashchange", followDeepLink);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", followDeepLink);
  } else {
    followDeepLink();
  }
})();
