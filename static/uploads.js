// Bring your own conversations: the list page's drop zone and file picker, the progress bar
// (bytes sent, then the files read as conversations are imported), the per-file results, and
// the count of conversations selected for a bulk delete. Untrusted text (file names, titles,
// error messages) only ever goes through textContent.
(function () {
  "use strict";

  var panel = document.querySelector("[data-upload]");
  if (panel) setUpUpload(panel);
  var bulk = document.querySelector("[data-bulk]");
  if (bulk) setUpBulk(bulk);

  function megabytes(bytes) {
    if (bytes < 1024 * 1024) return Math.max(1, Math.round(bytes / 1024)) + " KB";
    return (bytes / (1024 * 1024)).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0) + " MB";
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setUpUpload(panel) {
    var form = panel.querySelector("[data-upload-form]");
    var input = panel.querySelector("[data-file-input]");
    var zone = panel.querySelector("[data-drop-zone]");
    var format = panel.querySelector("[data-format]");
    var grouping = panel.querySelector("[data-recordings]");
    var copy = panel.querySelector("[data-copy]");
    var progress = panel.querySelector("[data-progress]");
    var bar = panel.querySelector("[data-bar]");
    var status = panel.querySelector("[data-status]");
    var results = panel.querySelector("[data-results]");
    var limits = {
      file: Number(panel.getAttribute("data-limit-file")),
      upload: Number(panel.getAttribute("data-limit-upload")),
      files: Number(panel.getAttribute("data-limit-files"))
    };
    var busy = false;

    input.addEventListener("change", function () {
      if (input.files && input.files.length) send(Array.prototype.slice.call(input.files));
      input.value = "";
    });
    // The drop zone takes a drop anywhere inside it; the page around it ignores stray drops
    // (a file dropped beside the zone would otherwise be opened by the browser).
    ["dragenter", "dragover"].forEach(function (type) {
      zone.addEventListener(type, function (e) {
        e.preventDefault();
        zone.classList.add("is-over");
      });
    });
    ["dragleave", "dragend"].forEach(function (type) {
      zone.addEventListener(type, function () { zone.classList.remove("is-over"); });
    });
    zone.addEventListener("drop", function (e) {
      e.preventDefault();
      zone.classList.remove("is-over");
      var files = e.dataTransfer && e.dataTransfer.files;
      if (files && files.length) send(Array.prototype.slice.call(files));
    });
    document.addEventListener("dragover", function (e) { e.preventDefault(); });
    document.addEventListener("drop", function (e) { e.preventDefault(); });

    function row(file) {
      var li = el("li", "upload-file");
      var head = el("div", "file-head");
      head.appendChild(el("span", "file-name", file.name));
      head.appendChild(el("span", "file-size muted", megabytes(file.size)));
      var state = el("span", "file-state", "waiting");
      head.appendChild(state);
      li.appendChild(head);
      var list = el("ul", "file-items");
      li.appendChild(list);
      results.appendChild(li);
      return {li: li, state: state, list: list, count: 0, already: 0, problems: 0};
    }

    function problem(r, text) {
      r.problems += 1;
      r.li.classList.add("has-problem");
      var item = el("li", "result-bad");
      item.appendChild(el("span", "result-error", text));
      r.list.appendChild(item);
      settle(r);
    }

    function settle(r) {
      var parts = [];
      if (r.count) parts.push(r.count + " conversation" + (r.count === 1 ? "" : "s"));
      if (r.already) parts.push(r.already + " already imported");
      if (r.problems) parts.push(r.problems + " problem" + (r.problems === 1 ? "" : "s"));
      r.state.textContent = parts.join(", ") || "nothing imported";
      r.state.className = "file-state " +
        (r.problems ? (r.count || r.already ? "partly" : "bad") : (r.count ? "ok" : "already"));
    }

    // A conversation imported before: not imported again; a link to it (and, when the file
    // holds another version of it, a note saying so).
    function already(r, report) {
      r.already += 1;
      var item = el("li", "result-already");
      var link = el("a", "", report.title || "Untitled");
      link.href = report.url;
      item.appendChild(link);
      item.appendChild(el("span", "muted", " already imported" +
        (report.source && report.source !== r.li.querySelector(".file-name").textContent ? " · " + report.source : "")));
      (report.notes || []).forEach(function (note) { item.appendChild(el("div", "muted", note)); });
      r.list.appendChild(item);
      settle(r);
    }

    function imported(r, report) {
      r.count += 1;
      var item = el("li", "result-ok");
      var link = el("a", "", report.title || "Untitled");
      link.href = report.url;
      item.appendChild(link);
      item.appendChild(el("span", "muted", " " + report.turns + " turn" + (report.turns === 1 ? "" : "s") +
        (report.source && report.source !== r.li.querySelector(".file-name").textContent ? " · " + report.source : "")));
      (report.forks || []).forEach(function (fork) {
        var sub = el("div", "result-fork");
        var forkLink = el("a", "", fork.title || "Branch");
        forkLink.href = fork.url;
        sub.appendChild(document.createTextNode("branch: "));
        sub.appendChild(forkLink);
        item.appendChild(sub);
      });
      (report.notes || []).forEach(function (note) { item.appendChild(el("div", "muted", note)); });
      r.list.appendChild(item);
      settle(r);
    }

    function phase(text, value) {
      progress.hidden = false;
      status.textContent = text;
      if (value === null) bar.removeAttribute("value");
      else bar.value = Math.max(0, Math.min(100, value));
    }

    function send(files) {
      if (busy) {
        phase("Wait for the upload under way to finish.", null);
        return;
      }
      results.textContent = "";
      var rows = files.map(row);
      var sent = [];
      var sentRows = [];
      var total = 0;
      files.forEach(function (file, i) {
        if (file.size > limits.file) {
          problem(rows[i], file.name + " is " + megabytes(file.size) + ", over the limit of " +
            megabytes(limits.file) + " per file: not sent.");
        } else {
          sent.push(file);
          sentRows.push(rows[i]);
          total += file.size;
        }
      });
      if (sent.length > limits.files) {
        phase("Too many files: at most " + limits.files + " per upload.", 0);
        sentRows.forEach(function (r) { r.state.textContent = "not sent"; });
        return;
      }
      if (total > limits.upload) {
        phase("Too large: " + megabytes(total) + " in all, over the limit of " +
          megabytes(limits.upload) + " per upload.", 0);
        sentRows.forEach(function (r) { r.state.textContent = "not sent"; });
        return;
      }
      if (!sent.length) {
        phase("Nothing to send.", 0);
        return;
      }
      var data = new FormData();
      // Recordings of one provider are one turn in the order given: send them in name order.
      var order = sent.map(function (file, i) { return i; });
      order.sort(function (a, b) { return sent[a].name < sent[b].name ? -1 : sent[a].name > sent[b].name ? 1 : a - b; });
      var rowOf = order.map(function (i) { return sentRows[i]; });
      order.forEach(function (i) { data.append("files", sent[i], sent[i].name); });
      data.append("format", format.value);
      if (grouping) data.append("recordings", grouping.value);
      if (copy && copy.checked) data.append("copy", "1");
      var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;

      var xhr = new XMLHttpRequest();
      var seen = 0;
      var done = false;
      busy = true;
      rowOf.forEach(function (r) { r.state.textContent = "sending"; });
      phase("Sending " + sent.length + " file" + (sent.length === 1 ? "" : "s") + "…", 0);
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) {
          phase("Sending: " + megabytes(e.loaded) + " of " + megabytes(e.total), 100 * e.loaded / e.total);
        }
      });
      xhr.upload.addEventListener("load", function () {
        rowOf.forEach(function (r) { r.state.textContent = "importing"; });
        phase("Sent. Importing…", 0);
      });
      function consume() {
        var text = xhr.responseText;
        var end = text.lastIndexOf("\n");
        if (end < seen) return;
        text.slice(seen, end).split("\n").forEach(function (line) {
          if (!line) return;
          var message;
          try { message = JSON.parse(line); } catch (err) { return; }
          handle(message);
        });
        seen = end + 1;
      }
      function handle(m) {
        if (m.type === "progress") {
          var count = m.imported + " conversation" + (m.imported === 1 ? "" : "s") + " imported" +
            (m.already_imported ? ", " + m.already_imported + " already there" : "");
          phase("Importing: " + count + (m.total ? ", " + Math.round(100 * m.done / m.total) + "% of the files read" : ""),
            m.total ? 100 * m.done / m.total : null);
        } else if (m.type === "conversation" || m.type === "already_imported" || m.type === "problem") {
          var targets = (m.files || []).map(function (i) { return rowOf[i]; }).filter(Boolean);
          if (!targets.length && rowOf.length === 1) targets = rowOf;
          targets.forEach(function (r) {
            if (m.type === "conversation") imported(r, m);
            else if (m.type === "already_imported") already(r, m);
            else problem(r, m.detail);
          });
        } else if (m.type === "done") {
          done = true;
          rowOf.forEach(function (r) { if (r.state.textContent === "importing") settle(r); });
          phase("Done: " + m.imported + " conversation" + (m.imported === 1 ? "" : "s") + " imported" +
            (m.already_imported ? ", " + m.already_imported + " already imported" : "") +
            (m.problems ? ", " + m.problems + " problem" + (m.problems === 1 ? "" : "s") : "") + ".", 100);
          panel.classList.add("is-done");
        } else if (m.type === "error") {
          phase(m.detail, null);
        }
      }
      xhr.addEventListener("progress", consume);
      xhr.addEventListener("load", function () {
        busy = false;
        if (xhr.status === 200) {
          consume();
          if (!done) phase("The import stopped before it finished; what is listed was imported.", null);
          return;
        }
        var detail = "The upload was refused (" + xhr.status + ").";
        try { detail = JSON.parse(xhr.responseText).detail || detail; } catch (err) { /* not JSON */ }
        phase(detail, 0);
        rowOf.forEach(function (r) { problem(r, detail); });
      });
      xhr.addEventListener("error", function () {
        busy = false;
        phase("The upload failed: the connection was lost.", 0);
        rowOf.forEach(function (r) { if (!r.count && !r.problems) r.state.textContent = "not imported"; });
      });
      xhr.open("POST", form.getAttribute("action"));
      xhr.setRequestHeader("X-CSRFToken", token);
      xhr.setRequestHeader("Accept", "application/x-ndjson");
      xhr.send(data);
    }
  }

  function setUpBulk(form) {
    var count = form.querySelector("[data-bulk-count]");
    var submit = form.querySelector("[data-bulk-submit]");
    var boxes = document.querySelectorAll("input[data-select]");
    if (!boxes.length) {
      form.hidden = true;
      return;
    }
    function update() {
      var n = 0;
      boxes.forEach(function (box) { if (box.checked) n += 1; });
      count.textContent = n ? n + " selected" : "Select conversations to delete several at once.";
      submit.disabled = !n;
    }
    boxes.forEach(function (box) { box.addEventListener("change", update); });
    update();
  }
})();
