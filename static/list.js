/*
 * The conversation list follows the viewer's conversations over /ws/conversations/: what the
 * business actions announce (conversations/actions/announce.py) once committed.
 *
 *   {"type": "conversation", "op": "add" | "update" | "remove", "conversation", "title",
 *    "shown"}
 *
 * A rename retitles its row and a delete takes its row away, wherever the row is. A new
 * conversation (a fork, an import, a replay, another tab's "New conversation") is the newest:
 * on the unfiltered first page (data-list-live="top") it is put at the top as a row of its own
 * (its counts come with the next load); on a search or another page, where it may not belong,
 * a notice says so with a link to load the list again. A socket that was lost may have missed
 * messages: the notice then says the list may be out of date.
 *
 * The shared links page (data-list-live="shares") follows the same channel:
 *
 *   {"type": "share", "op": "add" | "update" | "remove", "share", "conversation", "turn_count"}
 *
 * a revoked link's row goes, a link moved to now says so, a new link is announced by a notice
 * (its token is never sent over the socket: the page shows it from the server); a renamed
 * conversation retitles its links, a deleted one takes them away.
 */
(function () {
  "use strict";

  var root = document.querySelector("[data-list-live]");
  if (!root || !window.WebSocket) return;

  var list = document.querySelector("ol.conversation-list");
  var added = 0;
  var retries = 0;
  var opened = false;

  function rowOf(id) {
    return list ? list.querySelector('li.conversation-row[data-conversation-id="' + id + '"]') : null;
  }

  function notice(text) {
    var el = root.querySelector("[data-list-notice]");
    if (!el) {
      el = document.createElement("p");
      el.className = "notice";
      el.setAttribute("role", "status");
      el.dataset.listNotice = "";
      root.insertBefore(el, root.firstChild);
    }
    el.textContent = text + " ";
    var reload = document.createElement("a");
    reload.href = location.href;
    reload.textContent = "Load the list again";
    el.appendChild(reload);
  }

  function add(m) {
    if (rowOf(m.conversation)) return;
    if (root.dataset.listLive !== "top" || !list) {
      added++;
      notice(added + " new conversation" + (added === 1 ? "" : "s") + " since this page was loaded.");
      return;
    }
    var li = document.createElement("li");
    li.className = "conversation-row added";
    li.dataset.conversationId = m.conversation;
    var a = document.createElement("a");
    a.className = "row-link";
    a.href = "/c/" + m.conversation + "/";
    var title = document.createElement("span");
    title.className = "row-title";
    title.textContent = m.shown || "Untitled";
    a.appendChild(title);
    var meta = document.createElement("div");
    meta.className = "row-meta";
    meta.textContent = "just added";
    li.appendChild(a);
    li.appendChild(meta);
    list.insertBefore(li, list.firstChild);
  }

  function shareRows(conversation) {
    return document.querySelectorAll('li.share-row[data-conversation-id="' + conversation + '"]');
  }

  function handleOnShares(m) {
    var i, rows;
    if (m.type === "share" && m.op === "add") {
      added++;
      notice(added + " new link" + (added === 1 ? "" : "s") + " since this page was loaded.");
    } else if (m.type === "share" && m.op === "update") {
      var row = document.getElementById("share-" + m.share);
      var snapshot = row && row.querySelector("[data-snapshot]");
      if (snapshot) {
        snapshot.textContent = "just now, " + m.turn_count + " turn" + (m.turn_count === 1 ? "" : "s");
      }
    } else if (m.type === "share" && m.op === "remove") {
      var gone = document.getElementById("share-" + m.share);
      if (gone) gone.parentNode.removeChild(gone);
    } else if (m.type === "conversation" && m.op === "update") {
      rows = shareRows(m.conversation);
      for (i = 0; i < rows.length; i++) {
        var link = rows[i].querySelector("h2 a");
        if (link) link.textContent = m.title || "Untitled conversation";
      }
    } else if (m.type === "conversation" && m.op === "remove") {
      rows = shareRows(m.conversation);
      for (i = 0; i < rows.length; i++) rows[i].parentNode.removeChild(rows[i]);
    }
  }

  function handle(m) {
    if (!m) return;
    if (root.dataset.listLive === "shares") { handleOnShares(m); return; }
    if (m.type !== "conversation") return;
    var row = rowOf(m.conversation);
    if (m.op === "add") add(m);
    else if (m.op === "update" && row) {
      var title = row.querySelector(".row-title");
      if (title) title.textContent = m.shown || "Untitled";
      var label = row.querySelector(".select-row .visually-hidden");
      if (label) label.textContent = "Select “" + (m.shown || "Untitled") + "”";
    } else if (m.op === "remove" && row) {
      row.parentNode.removeChild(row);
    }
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + root.dataset.listWs);
    ws.onopen = function () {
      if (opened) notice("Live updates were interrupted: this list may be out of date.");
      opened = true;
      retries = 0;
      root.dataset.live = "open";
    };
    ws.onmessage = function (e) {
      var m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      if (m && m.type === "batch") (m.messages || []).forEach(handle); else handle(m);
    };
    ws.onclose = function (e) {
      root.dataset.live = "closed";
      if (e.code === 4401 || e.code === 4403) return;            // not logged in: no retry
      setTimeout(connect, Math.min(5000, 250 * Math.pow(2, retries++)) * (0.75 + Math.random() / 2));
    };
  }

  connect();
})();
