// Turnscope page behaviour: citation markers highlight their spans and show a source card;
// activating a marker focuses its source (a history entry, so Back returns to the marker); a
// source links back to the text citing it; menus close on Escape and outside clicks.
// Delegated, so live-inserted turns work too. Untrusted text only ever goes through textContent.
(function () {
  "use strict";

  var card = null;
  var cardMarker = null;   // the marker the card describes
  var hideTimer = null;
  var lastPointer = "mouse";
  var HIDE_MS = 350;       // time to move the pointer from a marker onto its card

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
    clearTimeout(hideTimer);
    document.querySelectorAll(".cite.is-active, .sources li.is-active").forEach(function (el) {
      el.classList.remove("is-active");
    });
    if (cardMarker) cardMarker.removeAttribute("aria-describedby");
    cardMarker = null;
    if (card) card.hidden = true;
  }

  function hideSoon() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(function () {
      var focused = document.activeElement;
      if (card && card.contains(focused)) return;          // the reader is in the card
      if (cardMarker && focused === cardMarker) return;
      if (card && card.matches(":hover")) return;
      clearActive();
    }, HIDE_MS);
  }

  function ensureCard() {
    if (card) return card;
    card = document.createElement("div");
    card.className = "source-card";
    card.setAttribute("role", "tooltip");
    card.id = "source-card";
    card.hidden = true;
    card.addEventListener("mouseenter", function () { clearTimeout(hideTimer); });
    card.addEventListener("mouseleave", hideSoon);
    card.addEventListener("focusout", function (e) {
      if (!card.contains(e.relatedTarget) && e.relatedTarget !== cardMarker) hideSoon();
    });
    // Inside the page's main landmark, like everything else a reader reads.
    (document.querySelector("main") || document.body).appendChild(card);
    return card;
  }

  function showCard(marker, item) {
    var c = ensureCard();
    c.textContent = "";
    var link = item.querySelector("a[href]:not(.cite-back)");
    var title = document.createElement(link ? "a" : "div");
    title.className = "card-title";
    title.textContent = item.getAttribute("data-title") || item.getAttribute("data-url") || "Source";
    if (link) {
      title.href = link.href;
      title.target = "_blank";
      title.rel = "noopener noreferrer nofollow";
    }
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
    if (marker.classList.contains("cite-repaired")) {
      var note = document.createElement("p");
      note.className = "card-note";
      note.textContent = "Placed by its quoted text: the provider's offsets did not match.";
      c.appendChild(note);
    }
    var rect = marker.getBoundingClientRect();
    c.hidden = false;
    var left = Math.min(window.scrollX + rect.left, window.scrollX + document.documentElement.clientWidth - c.offsetWidth - 8);
    c.style.left = Math.max(8, left) + "px";
    c.style.top = (window.scrollY + rect.bottom + 2) + "px";
    marker.setAttribute("aria-describedby", c.id);  // screen readers hear the excerpt
    cardMarker = marker;
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
  function markerAt(e) { return e.target.closest && e.target.closest(".cite-marker"); }

  // Where a marker is, so a history entry can come back to it: its turn and its place there.
  function markerPlace(marker) {
    var turn = turnOf(marker);
    if (!turn) return null;
    var all = turn.querySelectorAll(".cite-marker");
    return { turn: turn.id, marker: Array.prototype.indexOf.call(all, marker) };
  }

  function markerFrom(place) {
    var turn = place && document.getElementById(place.turn);
    return turn ? turn.querySelectorAll(".cite-marker")[place.marker] || null : null;
  }

  var previewed = false;   // the card already showed this marker when the tap began
  document.addEventListener("pointerdown", function (e) {
    lastPointer = e.pointerType || "mouse";
    var m = markerAt(e);
    previewed = !!m && cardMarker === m && card && !card.hidden;
  }, true);
  document.addEventListener("mouseover", function (e) {
    if (lastPointer === "touch") return;
    var m = markerAt(e);
    if (m) { clearTimeout(hideTimer); if (cardMarker !== m) activate(m); }
  });
  document.addEventListener("mouseout", function (e) {
    var m = markerAt(e);
    if (m && document.activeElement !== m) hideSoon();
  });
  document.addEventListener("focusin", function (e) {
    if (isMarker(e.target)) activate(e.target);
  });
  document.addEventListener("focusout", function (e) {
    if (isMarker(e.target) && !(card && card.contains(e.relatedTarget))) hideSoon();
  });

  function closeMenus(except) {
    document.querySelectorAll("details[data-menu][open]").forEach(function (d) {
      if (d !== except) d.open = false;
    });
  }

  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    var open = document.querySelector("details[data-menu][open]");
    if (open) {
      open.open = false;
      var summary = open.querySelector("summary");
      if (summary) summary.focus();
    }
    if (cardMarker) {
      var back = cardMarker;
      clearActive();
      if (card && document.activeElement && card.contains(document.activeElement)) back.focus();
    }
  });

  document.addEventListener("click", function (e) {
    var menu = e.target.closest && e.target.closest("details[data-menu]");
    closeMenus(menu);
    var back = e.target.closest && e.target.closest(".cite-back");
    if (back) {
      var turn = turnOf(back);
      var first = turn && turn.querySelector('.cite-marker[data-source="' + back.getAttribute("data-source") + '"]');
      if (!first) return;
      e.preventDefault();
      first.scrollIntoView({ block: "center" });
      first.focus();
      return;
    }
    var m = markerAt(e);
    if (!m) return;
    var item = sourceItem(m);
    if (!item) return;
    e.preventDefault();
    // On touch a first tap previews the source; a second tap on the same marker goes to it.
    if (lastPointer === "touch" && !previewed) {
      activate(m);
      return;
    }
    clearActive();
    // This entry remembers the marker; the new one is the source. Back comes back here.
    var here = history.state && typeof history.state === "object" ? history.state : {};
    var state = {};
    for (var k in here) state[k] = here[k];
    state.turnscopeMarker = markerPlace(m);
    state.turnscopeScroll = window.scrollY;
    history.replaceState(state, "");
    history.pushState({ turnscopeSource: item.id }, "", "#" + item.id);
    item.focus();
    item.classList.add("is-active");
  });

  window.addEventListener("popstate", function (e) {
    var state = e.state || {};
    if (state.turnscopeMarker) {
      clearActive();
      if (typeof state.turnscopeScroll === "number") window.scrollTo(0, state.turnscopeScroll);
      var marker = markerFrom(state.turnscopeMarker);
      if (marker) marker.focus({ preventScroll: true });
    } else if (state.turnscopeSource) {
      var item = document.getElementById(state.turnscopeSource);
      if (item) item.focus();
    }
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

// Copy buttons on message code blocks: added here (not in the rendered HTML, which stays
// markup-only), for blocks already on the page and for those live updates insert.
(function () {
  "use strict";

  function addButton(pre) {
    if (pre.querySelector(":scope > .code-copy") || !pre.querySelector(":scope > code")) return;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "code-copy";
    button.textContent = "Copy";
    button.setAttribute("aria-label", "Copy code");
    pre.insertBefore(button, pre.firstChild);
  }

  function scan(root) {
    if (!root.querySelectorAll) return;
    if (root.matches && root.matches(".message pre")) addButton(root);
    root.querySelectorAll(".message pre").forEach(addButton);
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "visually-hidden";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }

  var status = null;
  function liveRegion() {
    if (status) return status;
    status = document.createElement("div");
    status.className = "visually-hidden";
    status.setAttribute("aria-live", "polite");
    document.body.appendChild(status);
    return status;
  }

  function announce(button, state, label) {
    if (state) liveRegion().textContent = label;
    button.setAttribute("data-state", state);
    button.textContent = label;
    button.setAttribute("aria-label", label === "Copy" ? "Copy code" : label);
    clearTimeout(button._reset);
    button._reset = setTimeout(function () { announce(button, "", "Copy"); }, 2000);
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest(".code-copy");
    if (!button) return;
    var code = button.parentNode.querySelector(":scope > code");
    if (!code) return;
    copyText(code.textContent).then(
      function () { announce(button, "copied", "Copied"); },
      function () { announce(button, "failed", "Copy failed"); }
    );
  });

  function start() {
    scan(document);
    new MutationObserver(function (records) {
      records.forEach(function (record) { record.addedNodes.forEach(scan); });
    }).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
