/*
 * A reader's tools on the conversation page:
 * - "Copy answer" on each finished agent turn: the turn as the Markdown export writes it
 *   (citations as footnotes), fetched from the server, on the clipboard.
 * - Search inside the conversation: every turn, not only the window the page shows. A result
 *   on the page is scrolled to and its match marked; one that is not opens the window that
 *   holds it (?turn=…&find=…), where the match is marked once the page has loaded.
 * Text from the server only ever goes in through textContent.
 */
(function () {
  "use strict";

  var main = document.getElementById("conversation");
  if (!main || !main.dataset.conversationId) return;
  var base = "/c/" + main.dataset.conversationId + "/";

  // -- Copy answer ------------------------------------------------------------------------

  // The button is in the turn's fragment, hidden: it works only with script.
  function addCopy(section) {
    var button = section.querySelector(":scope > .turn-actions > .answer-copy");
    if (button) button.hidden = false;
  }

  function scan(root) {
    if (!root.querySelectorAll) return;
    if (root.matches && root.matches("section.turn.agent")) addCopy(root);
    root.querySelectorAll("section.turn.agent").forEach(addCopy);
  }

  function say(button, text) {
    button.textContent = text;
    clearTimeout(button._reset);
    button._reset = setTimeout(function () { button.textContent = "Copy answer"; }, 2500);
  }

  function markdownOf(index) {
    return fetch(base + "turns/" + index + "/markdown/", { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("markdown " + r.status);
        return r.text();
      });
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest(".answer-copy");
    if (!button) return;
    var text = markdownOf(button.getAttribute("data-index"));
    var done;
    if (navigator.clipboard && window.ClipboardItem && window.isSecureContext) {
      // The item is written now (in the click) and filled when the text arrives.
      done = navigator.clipboard.write([new ClipboardItem({
        "text/plain": text.then(function (t) { return new Blob([t], { type: "text/plain" }); })
      })]);
    } else if (navigator.clipboard && window.isSecureContext) {
      done = text.then(function (t) { return navigator.clipboard.writeText(t); });
    } else {
      done = Promise.reject(new Error("no clipboard"));
    }
    done.then(function () { say(button, "Copied as Markdown"); },
              function () { say(button, "Copy failed"); });
  });

  // -- Search inside the conversation -----------------------------------------------------

  function unmark() {
    document.querySelectorAll("mark.find-mark").forEach(function (mark) {
      var parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    });
    document.querySelectorAll("section.turn.find-hit").forEach(function (s) {
      s.classList.remove("find-hit");
    });
  }

  // Mark the first occurrence of the text in the turn's messages (inside one text node);
  // the turn itself is marked when the match spans formatting.
  function markIn(section, query) {
    unmark();
    var needle = query.toLowerCase();
    var mark = null;
    section.querySelectorAll(".message, .streaming-tail").forEach(function (box) {
      if (mark) return;
      var walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
      var node;
      while (!mark && (node = walker.nextNode())) {
        var at = node.data.toLowerCase().indexOf(needle);
        if (at === -1) continue;
        var hit = node.splitText(at);
        hit.splitText(query.length);
        mark = document.createElement("mark");
        mark.className = "find-mark";
        hit.parentNode.replaceChild(mark, hit);
        mark.appendChild(hit);
      }
    });
    section.classList.add("find-hit");
    section.setAttribute("tabindex", "-1");
    section.focus({ preventScroll: true });
    (mark || section).scrollIntoView({ block: "center" });
    return mark;
  }

  var form = document.querySelector("form[data-find]");
  if (form) {
    var input = form.querySelector("[data-find-query]");
    var list = form.querySelector("[data-find-results]");
    var status = form.querySelector("[data-find-status]");

    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var query = input.value.trim();
      list.textContent = "";
      list.hidden = true;
      if (!query) { status.textContent = "Type something to find."; return; }
      status.textContent = "Searching…";
      fetch(form.action + "?" + new URLSearchParams({ q: query }).toString(), {
        credentials: "same-origin", headers: { "Accept": "application/json" }
      }).then(function (r) {
        return r.json().then(function (data) { return { ok: r.ok, data: data }; });
      }).then(function (r) {
        if (!r.ok) { status.textContent = r.data.detail || "The search failed."; return; }
        var results = r.data.results || [];
        status.textContent = results.length
          ? results.length + (r.data.more ? "+" : "") + " turn" + (results.length === 1 ? "" : "s") + " found"
          : "Nothing in this conversation says that.";
        results.forEach(function (found) {
          var item = document.createElement("li");
          var link = document.createElement("a");
          link.href = found.url;
          link.setAttribute("data-turn", found.turn);
          link.setAttribute("data-query", r.data.query);
          link.textContent = "Turn " + found.index + " · " + (found.role === "agent" ? "Assistant" : found.role === "user" ? "User" : "System");
          var mark = document.createElement("mark");
          mark.textContent = found.match;
          item.appendChild(link);
          item.appendChild(document.createTextNode(": " + found.before));
          item.appendChild(mark);
          item.appendChild(document.createTextNode(found.after));
          list.appendChild(item);
        });
        list.hidden = !results.length;
      }).catch(function () { status.textContent = "Could not reach Turnscope."; });
    });

    list.addEventListener("click", function (e) {
      var link = e.target.closest && e.target.closest("a[data-turn]");
      if (!link || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      var section = document.getElementById("turn-" + link.getAttribute("data-turn"));
      if (!section) return;  // not on the page: the link opens the window that holds it
      e.preventDefault();
      history.pushState(history.state, "", link.href);
      markIn(section, link.getAttribute("data-query"));
    });
  }

  // Arrived from a result: mark the match in the turn the link named.
  function arrived() {
    var params = new URLSearchParams(location.search);
    var query = params.get("find");
    var turn = params.get("turn");
    if (!query || !turn) return;
    if (form) form.querySelector("[data-find-query]").value = query;
    var section = document.getElementById("turn-" + turn);
    if (section) markIn(section, query);
  }

  function start() {
    scan(document);
    new MutationObserver(function (records) {
      records.forEach(function (record) { record.addedNodes.forEach(scan); });
      // a turn that finishes streaming gets its actions, then its button
    }).observe(main, { childList: true, subtree: true });
    arrived();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
