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
