/*
 * Turnscope live view: follows a conversation over its websocket and converges to the store.
 *
 * The page (server-rendered) is the truth it starts from: <main id="conversation"
 * data-conversation-id data-ws-path data-last-seq>, one <section class="turn" id="turn-<id>"
 * data-turn-id data-index data-status> per turn, and in a streaming turn a
 * <div class="streaming-tail" data-delta-seq="K"> holding the raw text streamed so far.
 *
 * Messages carry sequence numbers: committed events have per-conversation seqs (seq_from..seq_to),
 * text deltas a per-turn delta_seq. A gap, a reconnect, or silence while a turn streams makes the
 * page resync: GET /c/<id>/state/ says what changed, and each changed turn is re-fetched whole
 * from /c/<id>/turns/<index>/ (rendered by the server). Deltas that arrive meanwhile are kept and
 * applied on top of the fetched fragment's tail by delta_seq, so nothing is lost or doubled.
 *
 * Streaming text is never parsed as HTML: it goes in with textContent. Only the open markdown
 * block of the tail is rewritten per delta; a message's finished blocks (split at a blank line
 * outside a code fence, by the server) come rendered by the server in the delta that finished
 * them (sanitized HTML, as a fragment is) and are appended once and left alone, so the cost of
 * a turn grows linearly with its length. Reasoning stays raw text, split here the same way.
 */
(function () {
  "use strict";

  var main = document.getElementById("conversation");
  if (!main || !main.dataset.wsPath || !window.WebSocket) return;

  var conversationId = main.dataset.conversationId;
  var base = "/c/" + conversationId + "/";
  var IDLE_RESYNC_MS = 4000;   // silence while a turn streams -> ask for the state
  var POLL_MS = 5000;          // socket down -> poll the state over HTTP
  var MIN_REFETCH_MS = 150;

  var live = {
    lastSeq: parseInt(main.dataset.lastSeq || "0", 10) || 0,
    turns: {},            // turn id -> view
    ws: null,
    retries: 0,
    lastMessageAt: Date.now(),
    syncing: false,
    queued: [],           // messages received while a full resync runs
    stopped: false,
    stats: { messages: 0, deltas: 0, gaps: 0, resyncs: 0, fragments: 0, reconnects: 0,
             refused: 0 }
  };

  // ---------------------------------------------------------------------------------- tail

  // -------------------------------------------------------------------------- follow the stream

  // A reader at the bottom of the page stays there as the turn grows; one who scrolled up is
  // left where they are.
  var FOLLOW_SLACK_PX = 48;

  function scroller() { return document.scrollingElement || document.documentElement; }

  function atBottom() {
    var el = scroller();
    return el.scrollHeight - el.scrollTop - el.clientHeight <= FOLLOW_SLACK_PX;
  }

  function following(change) {
    var follow = atBottom() && streamingVisible();
    change();
    if (follow) scroller().scrollTop = scroller().scrollHeight;
    markStreaming();
  }

  // "● live" means a turn is streaming, not merely that the socket is open.
  function markStreaming() {
    main.dataset.streaming = streamingVisible() ? "yes" : "no";
  }

  // ---------------------------------------------------------------------------------- tail

  // The paragraph a tail continues: the last block of the message just before it, when that is
  // a paragraph (a block that continues a cited sentence is not a paragraph of its own).
  function continuedParagraph(el) {
    var prev = el.previousElementSibling;
    if (!prev || !prev.classList.contains("message")) return null;
    var last = prev.lastElementChild;
    while (last && last.classList && last.classList.contains("badge")) last = last.previousElementSibling;
    return last && last.tagName === "P" ? last : null;
  }

  function Tail(el) {
    this.el = el;
    // null: unknown (a fragment without a tail); wait for a delta that opens a block.
    this.deltaSeq = el.dataset.deltaSeq != null ? (parseInt(el.dataset.deltaSeq, 10) || 0) : null;
    this.blockSeq = null;
    var raw = el.textContent || "";
    // A fragment rendered mid-stream holds the finished blocks rendered and the rest raw.
    var rendered = el.querySelector(":scope > .tail-done");
    var open = el.querySelector(":scope > .tail-open");
    if (rendered) raw = open ? open.textContent : "";
    el.textContent = "";
    this.done = rendered || document.createElement("div");
    this.done.className = "tail-done";
    this.open = document.createElement("div");
    this.open.className = "tail-open";
    this.cites = document.createElement("ul");
    this.cites.className = "tail-cites";
    el.appendChild(this.done);
    el.appendChild(this.open);
    el.appendChild(this.cites);
    // Until its first block ends, text that continues the previous paragraph is shown inside
    // it, where the rendered text will be, so the layout does not jump when the block commits.
    this.joinTo = rendered ? null : continuedParagraph(el);
    this.inline = null;
    // The space the run's text before this tail ended with (its paragraph was rendered
    // without it): put back where this tail's text joins that paragraph.
    this.lead = el.dataset.lead || "";
    this.pending = "";   // text of the open markdown block
    this.scan = 0;       // where the next unscanned line of `pending` starts
    this.inFence = false;
    this.length = raw.length;
    if (raw) this.append(raw);
  }

  Tail.prototype.append = function (text) {
    this.pending += text;
    this.length += text.length;
    if (this.joinTo && !this.inline && !this.done.firstChild) {
      if (/^\s*\n/.test(this.pending)) {
        this.joinTo = null;                  // it starts a new block: not a continuation
      } else if (/\S/.test(this.pending)) {
        this.inline = document.createElement("span");
        this.inline.className = "tail-inline";
        this.joinTo.appendChild(this.inline);
      }
    }
    if (this.el.dataset.kind !== "message") this.split();  // a message's: the server's
    this.show();
  };

  Tail.prototype.show = function () {
    var target = this.inline && this.joinTo ? this.inline : this.open;
    // Blank lines around the open block are the gap between blocks (margins), not text: a
    // trailing one shown would be a line that vanishes when the block commits (a list the
    // server keeps open past a blank line), and the page would jump up.
    var text = this.pending.replace(/\s*\n\s*$/, "");
    target.textContent = target === this.open ? text.replace(/^\n+/, "") : this.joined(text);
    if (target !== this.open) this.open.textContent = "";
  };

  // Text joined to the previous paragraph, with the space that paragraph's text ended with.
  Tail.prototype.joined = function (text) {
    var before = this.joinTo ? this.joinTo.textContent : "";
    // The paragraph's own text: without this tail's inline text, shown inside it (when that
    // ended with a space, the lead was dropped: "minutes.The Moon").
    if (this.inline && this.inline.parentNode === this.joinTo) {
      before = before.slice(0, before.length - this.inline.textContent.length);
    }
    return this.lead && !/\s$/.test(before) && !/^\s/.test(text) ? this.lead + text : text;
  };

  // The first `n` code points of `text` (the server counts code points; JS, UTF-16 units).
  function codePoints(text, n) {
    var i = 0;
    while (n > 0 && i < text.length) {
      var c = text.charCodeAt(i);
      i += c >= 0xD800 && c <= 0xDBFF && i + 1 < text.length ? 2 : 1;
      n--;
    }
    return i;
  }

  // Blocks the server finished and rendered: each replaces its raw text at the front of the
  // open block, appended once.
  Tail.prototype.rendered = function (blocks) {
    for (var i = 0; i < blocks.length; i++) {
      var cut = codePoints(this.pending, blocks[i].chars);
      var raw = this.pending.slice(0, cut);
      this.pending = this.pending.slice(cut);
      this.scan = 0;
      if (this.inline && this.joinTo) {
        this.inline.textContent = this.joined(raw.replace(/\n+$/, ""));
        this.joinTo = null;                  // later blocks are blocks of their own
      } else {
        var block = document.createElement("div");
        block.className = "tail-block rendered";
        block.innerHTML = blocks[i].html;    // the server's sanitized rendering
        this.done.appendChild(block);
      }
    }
    this.show();
  };

  // Move finished markdown blocks out of `pending`: a blank line outside a code fence ends one.
  Tail.prototype.split = function () {
    var pos = this.scan;
    for (;;) {
      var nl = this.pending.indexOf("\n", pos);
      if (nl < 0) break;
      var line = this.pending.slice(pos, nl);
      if (/^ {0,3}(```|~~~)/.test(line)) {
        this.inFence = !this.inFence;
      } else if (!this.inFence && line.trim() === "" && this.pending.slice(0, pos).trim() !== "") {
        var finished = this.pending.slice(0, nl + 1);
        if (this.inline && this.joinTo) {
          this.inline.textContent = finished.replace(/\n+$/, "");
          this.joinTo = null;                // later blocks are blocks of their own
        } else {
          var block = document.createElement("div");
          block.className = "tail-block";
          block.textContent = finished.replace(/^\n+/, "").replace(/\n+$/, "");
          this.done.appendChild(block);
        }
        this.pending = this.pending.slice(nl + 1);
        pos = 0;
        continue;
      }
      pos = nl + 1;
    }
    this.scan = pos;
  };

  Tail.prototype.addCitations = function (cites) {
    for (var i = 0; i < (cites || []).length; i++) {
      var li = document.createElement("li");
      li.className = "tail-cite";
      li.textContent = cites[i].title || cites[i].url || "source";
      li.title = cites[i].url || "";
      this.cites.appendChild(li);
    }
  };

  Tail.prototype.setSeq = function (seq) {
    this.deltaSeq = seq;
    this.el.dataset.deltaSeq = String(seq);
  };

  // ---------------------------------------------------------------------------------- turns

  function viewFor(section) {
    var id = section.dataset.turnId || section.id.replace(/^turn-/, "");
    var view = live.turns[id];
    if (!view) {
      view = live.turns[id] = { id: id, fetching: false, again: false, buffer: [], lastFetch: 0 };
    }
    view.el = section;
    view.index = parseInt(section.dataset.index, 10);
    var tailEl = section.querySelector(".streaming-tail");
    view.tail = null;
    if (section.dataset.status === "streaming") view.tail = tailEl ? new Tail(tailEl) : ensureTail(view);
    return view;
  }

  function scanPage() {
    var sections = main.querySelectorAll("section.turn");
    for (var i = 0; i < sections.length; i++) viewFor(sections[i]);
  }

  function ensureTail(view) {
    if (view.tail) return view.tail;
    var el = document.createElement("div");
    el.className = "streaming-tail";
    view.el.appendChild(el);
    view.tail = new Tail(el);
    return view.tail;
  }

  // The previous block ended (its event is committed and its fragment is on the way): keep its
  // text visible and start a fresh tail after it.
  function nextTail(view) {
    var old = view.tail;
    if (!old || old.length === 0) return old || ensureTail(view);
    var el = document.createElement("div");
    el.className = "streaming-tail";
    old.el.classList.remove("streaming-tail");
    old.el.classList.add("streaming-tail-ended");
    old.el.parentNode.insertBefore(el, old.el.nextSibling);
    var tail = new Tail(el);
    if (old.deltaSeq !== null) tail.setSeq(old.deltaSeq);
    view.tail = tail;
    return tail;
  }

  function applyDelta(view, m) {
    var tail = view.tail || ensureTail(view);
    if (tail.deltaSeq === null) {
      if (m.block_seq !== m.delta_seq) return;                // mid-block: shown once committed
    } else if (m.delta_seq <= tail.deltaSeq) {
      return;                                                 // already shown
    } else if (m.delta_seq !== tail.deltaSeq + 1) {           // a gap: fetch the turn again
      live.stats.gaps++;
      view.buffer.push(m);
      refetch(view);
      return;
    }
    following(function () {
      if (m.block_seq === m.delta_seq) tail = nextTail(view); // this delta opens a block
      tail.blockSeq = m.block_seq;
      if (m.kind) tail.el.dataset.kind = m.kind;
      if (m.lead) tail.lead = m.lead;
      if (m.text) tail.append(m.text);
      if (m.rendered) tail.rendered(m.rendered);
      tail.addCitations(m.citations);
      tail.setSeq(m.delta_seq);
    });
    live.stats.deltas++;
  }

  function placeSection(section, index) {
    var empty = main.querySelector("[data-live-empty]");  // "no turns yet", if the page has it
    if (empty) empty.hidden = true;
    var sections = main.querySelectorAll("section.turn");
    for (var i = 0; i < sections.length; i++) {
      if (parseInt(sections[i].dataset.index, 10) > index) {
        sections[i].parentNode.insertBefore(section, sections[i]);
        return;
      }
    }
    if (sections.length) {
      var last = sections[sections.length - 1];
      last.parentNode.insertBefore(section, last.nextSibling);
    } else {
      (main.querySelector("[data-turns]") || main).appendChild(section);
    }
  }

  function parseFragment(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var section = doc.querySelector("section.turn");
    return section ? document.importNode(section, true) : null;
  }

  // Fetch a turn's fragment and put it in place (replacing the old one); then apply the deltas
  // that arrived meanwhile on top of the fragment's tail.
  function refetch(view) {
    if (view.fetching) { view.again = true; return; }
    view.fetching = true;
    var wait = Math.max(0, view.lastFetch + MIN_REFETCH_MS - Date.now());
    setTimeout(function () {
      view.lastFetch = Date.now();
      fetch(base + "turns/" + view.index + "/", {
        credentials: "same-origin", headers: { "X-Requested-With": "fetch" }, cache: "no-store"
      }).then(function (r) {
        if (!r.ok) throw new Error("fragment " + r.status);
        return r.text();
      }).then(function (html) {
        var section = parseFragment(html);
        if (!section) throw new Error("fragment without a turn");
        live.stats.fragments++;
        following(function () {
          if (view.el && view.el.parentNode) {
            view.el.parentNode.replaceChild(section, view.el);
          } else {
            placeSection(section, view.index);
          }
        });
        var id = section.dataset.turnId || section.id.replace(/^turn-/, "");
        if (id !== view.id) { delete live.turns[view.id]; view.id = id; live.turns[id] = view; }
        viewFor(section);
        view.fetching = false;
        var buffered = view.buffer.sort(function (a, b) { return a.delta_seq - b.delta_seq; });
        view.buffer = [];
        if (view.tail) {
          for (var i = 0; i < buffered.length; i++) applyDelta(view, buffered[i]);
        }  // else the turn is no longer streaming: its fragment has every committed block
        if (view.again) { view.again = false; refetch(view); }
      }).catch(function () {
        view.fetching = false;
        setTimeout(function () { refetch(view); }, 1000);
      });
    }, wait);
  }

  // A long conversation's page shows a window of its turns (data-window-from, and
  // data-window-end when the window stops before the newest turn): turns outside it are not
  // followed or fetched, so a 5,000-turn conversation costs what its window costs.
  function inWindow(index) {
    var from = parseInt(main.dataset.windowFrom || "0", 10) || 0;
    var end = main.dataset.windowEnd ? parseInt(main.dataset.windowEnd, 10) : null;
    if (typeof index !== "number" || isNaN(index)) return true;
    return index >= from && (end === null || isNaN(end) || index < end);
  }

  function turnView(m) {
    var view = live.turns[m.turn];
    if (view) return view;
    if (!inWindow(m.index)) return null;
    // A turn this page has not shown yet: fetch it by index and insert it.
    view = live.turns[m.turn] = {
      id: m.turn, index: m.index, el: null, tail: null, fetching: false, again: false,
      buffer: [], lastFetch: 0
    };
    refetch(view);
    return view;
  }

  // ---------------------------------------------------------------------------------- messages

  function handle(m) {
    if (live.syncing && m.type !== "state" && m.type !== "hello") {
      live.queued.push(m);
      return;
    }
    switch (m.type) {
      case "batch":
        (m.messages || []).forEach(handle);
        break;
      case "delta": {
        var view = turnView(m);
        if (!view) break;
        if (view.fetching || !view.el) view.buffer.push(m);
        else if (view.el.dataset.status === "streaming") applyDelta(view, m);
        break;
      }
      case "events":
        if (m.seq_to <= live.lastSeq) break;                      // seen
        if (m.seq_from > live.lastSeq + 1) { live.stats.gaps++; resync(); break; }
        live.lastSeq = m.seq_to;
        main.dataset.lastSeq = String(live.lastSeq);
        var changed = turnView(m);
        if (changed) refetch(changed);
        break;
      case "turn": {
        if (m.seq > live.lastSeq) { live.stats.gaps++; resync(); break; }
        var known = live.turns[m.turn];
        var tv = turnView(m);
        if (known && tv && tv.el && (tv.el.dataset.status !== m.status || m.model)) refetch(tv);
        break;
      }
      case "hello":
      case "state":
        applyState(m);
        break;
      case "conversation":                                        // a business action's
        if (m.op === "update") showTitle(m.title, m.shown);
        else if (m.op === "remove") showDeleted();
        break;
      default:
        break;                                                    // pong, error
    }
  }

  // ---------------------------------------------------------------------- the conversation

  // A rename (announced, or read from the state document after a reconnect): the heading, the
  // tab's title and the rename form's value (unless it is being edited).
  function showTitle(title, shown) {
    if (typeof title !== "string") return;
    var heading = document.querySelector(".conversation-head h1");
    if (heading) heading.textContent = shown || "Untitled conversation";
    document.title = (shown || "Conversation") + " · Turnscope";
    var input = document.getElementById("rename-title");
    if (input && document.activeElement !== input) { input.value = title; input.defaultValue = title; }
    main.dataset.title = title;
  }

  // Deleted (here or in another tab): say so where the page begins, and stop following it.
  function showDeleted(text) {
    if (main.dataset.deleted === "yes") return;
    main.dataset.deleted = "yes";
    var notice = document.createElement("p");
    notice.className = "notice bad";
    notice.setAttribute("role", "alert");
    notice.dataset.deletedNotice = "";
    notice.textContent = text || "This conversation was deleted. What is shown here is no longer stored.";
    main.insertBefore(notice, main.firstChild);
    var forms = main.querySelectorAll("form button, form input, form select, form textarea");
    for (var i = 0; i < forms.length; i++) forms[i].disabled = true;
    live.stopped = true;
    setState("deleted");
    if (live.ws) { var ws = live.ws; live.ws = null; ws.close(1000, "deleted"); }
  }

  function applyState(s) {
    var before = live.lastSeq;
    if (s.title !== undefined && s.title !== main.dataset.title) showTitle(s.title, s.shown);
    (s.turns || []).forEach(function (t) {
      var view = live.turns[t.id];
      if (!view || !view.el) {
        turnView({ turn: t.id, index: t.index });
        return;
      }
      if (!inWindow(t.index)) return;
      var tail = (s.tails || {})[t.id];
      if (t.last_seq > before || view.el.dataset.status !== t.status) {
        refetch(view);
      } else if (t.status === "streaming" && tail &&
                 (!view.tail || tail.delta_seq > view.tail.deltaSeq)) {
        refetch(view);
      }
    });
    if (s.last_seq > live.lastSeq) {
      live.lastSeq = s.last_seq;
      main.dataset.lastSeq = String(live.lastSeq);
    }
    live.syncing = false;
    var queued = live.queued;
    live.queued = [];
    queued.forEach(handle);
  }

  function resync() {
    if (live.syncing) return;
    live.syncing = true;
    live.stats.resyncs++;
    fetch(base + "state/?after=" + live.lastSeq, {
      credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json" }
    }).then(function (r) {
      if (!r.ok) throw new Error("state " + r.status);
      return r.json();
    }).then(applyState).catch(function () {
      live.syncing = false;
      setTimeout(resync, 1000);
    });
  }

  // ---------------------------------------------------------------------------------- socket

  function setState(name) { main.dataset.live = name; }

  // The server's close codes (live/consumers.py; 4000 + the HTTP status they mean).
  var CLOSE_FINAL = { 4401: "unauthenticated", 4403: "forbidden" };   // do not retry
  // What this page sent was refused (malformed, binary, too big, too frequent): the new
  // connection starts clean, and the page resyncs from the store as on any reconnect.
  var CLOSE_REFUSED = { 4400: true, 4413: true, 4415: true, 4429: true };
  var RATE_WINDOW_MS = 10000;

  function connect() {
    if (live.stopped) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + location.host + main.dataset.wsPath);
    live.ws = ws;
    setState("connecting");
    ws.onopen = function () { live.retries = 0; setState("open"); live.lastMessageAt = Date.now(); };
    ws.onmessage = function (e) {
      live.lastMessageAt = Date.now();
      live.stats.messages++;
      var m;
      try { m = JSON.parse(e.data); } catch (err) { return; }
      if (m && typeof m === "object") handle(m);
    };
    ws.onclose = function (e) {
      if (live.ws !== ws) return;
      live.ws = null;
      if (CLOSE_FINAL[e.code]) {
        live.stopped = true;
        setState(CLOSE_FINAL[e.code]);
        if (e.code === 4403) goneWhileAway();
        return;
      }
      setState("reconnecting");
      live.stats.reconnects++;
      if (CLOSE_REFUSED[e.code]) live.stats.refused++;
      var delay = Math.min(5000, 250 * Math.pow(2, live.retries++)) * (0.75 + Math.random() / 2);
      // Over the server's message rate: wait out its window before trying again.
      if (e.code === 4429) delay = Math.max(delay, RATE_WINDOW_MS);
      setTimeout(connect, delay);
    };
  }

  // Refused on a reconnect: the delete may have been announced while this page was away. The
  // state says whether the conversation is still there for this viewer.
  function goneWhileAway() {
    fetch(base + "state/", { credentials: "same-origin", cache: "no-store",
                             headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.status === 404) {
          showDeleted("This conversation is no longer here (it was deleted, or is no longer " +
                      "yours). What is shown here is what it was.");
        }
      }).catch(function () {});
  }

  function streamingVisible() {
    return !!main.querySelector('section.turn[data-status="streaming"]');
  }

  // Silence while a turn streams may mean dropped messages (or a runner in another process):
  // ask for the state. With the socket down, poll it over HTTP.
  setInterval(function () {
    if (live.stopped || !streamingVisible()) return;
    var quiet = Date.now() - live.lastMessageAt;
    if (live.ws && live.ws.readyState === WebSocket.OPEN) {
      if (quiet > IDLE_RESYNC_MS) {
        live.lastMessageAt = Date.now();
        live.ws.send(JSON.stringify({ type: "sync", after: live.lastSeq }));
      }
    } else if (quiet > POLL_MS) {
      live.lastMessageAt = Date.now();
      resync();
    }
  }, 1000);

  scanPage();
  markStreaming();
  // Turns the "Earlier turns" control put on the page (static/app.js) are followed too.
  document.addEventListener("turnscope:turns-inserted", scanPage);
  connect();

  // For tests and the curious: the live state, and a way to cut the socket.
  window.turnscopeLive = {
    stats: live.stats,
    lastSeq: function () { return live.lastSeq; },
    drop: function () { if (live.ws) live.ws.close(4000, "dropped by the page"); },
    busy: function () {
      if (live.syncing) return true;
      for (var id in live.turns) if (live.turns[id].fetching) return true;
      return false;
    }
  };
})();
