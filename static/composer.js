/*
 * The composer (and the re-run form): Send posts the prompt without leaving the page (the live
 * view shows the turns as they stream), Stop stops the streaming turn, Ctrl/Cmd+Enter sends,
 * choosing a provider offers its models. Send is disabled while a turn streams, Stop otherwise.
 * Without script the forms post and the page reloads. Text from the server goes in with
 * textContent only.
 */
(function () {
  "use strict";

  function csrf(form) {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function models(form) {
    var select = form.querySelector("[data-composer-provider]");
    var model = form.querySelector("[data-composer-model]");
    var list = document.getElementById("composer-models");
    if (!select || !model) return;
    select.addEventListener("change", function () {
      var option = select.options[select.selectedIndex];
      var names = (option && option.dataset.models || "").split(" ").filter(Boolean);
      if (names.length) model.value = names[0];
      if (list) {
        list.textContent = "";
        names.forEach(function (name) {
          var o = document.createElement("option");
          o.value = name;
          list.appendChild(o);
        });
      }
    });
  }

  function composer(form) {
    var prompt = form.querySelector("[data-composer-prompt]");
    var send = form.querySelector("[data-composer-send]");
    var stop = form.querySelector("[data-composer-stop]");
    var status = form.querySelector("[data-composer-status]");
    var sending = false;
    var usable = send && !send.disabled;
    // The turn a Send started, until it shows how it went: the provider answers after the
    // 202, so a refused request fails the turn then (its prompt is given back to edit).
    var pending = null;

    function say(text, bad) {
      status.textContent = text || "";
      status.classList.toggle("bad", !!bad);
    }

    function streaming() {
      return !!document.querySelector('section.turn[data-status="streaming"]');
    }

    function settle() {
      if (!pending) return;
      var section = document.querySelector('section.turn[data-turn-id="' + pending.id + '"]');
      var status = section && section.dataset.status;
      if (!status || status === "streaming" && !section.querySelector(".message")) return;
      if (status === "failed") {
        var error = section.querySelector("li.error");
        say("Not sent: the provider refused it" + (error ? " (" + error.textContent.replace(/\s+/g, " ").trim() + ")." : "."), true);
        if (!prompt.value) prompt.value = pending.prompt;
      } else {
        say(pending.recorded ? "Sent: the recorded provider answers (no key is set)." : "Sent: the answer streams in above.");
      }
      pending = null;
    }

    function refresh() {
      settle();
      var busy = streaming();
      if (send) send.disabled = !usable || sending || busy;
      if (stop) stop.disabled = !busy;
    }

    function post(url, body) {
      return fetch(url, {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRFToken": csrf(form) }
      }).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (data) {
          return { ok: r.ok, status: r.status, data: data };
        });
      });
    }

    form.addEventListener("submit", function (e) {
      var submitter = e.submitter;
      e.preventDefault();
      if (submitter && submitter === stop) {
        say("Stopping…");
        var body = new FormData();  // an empty multipart body is refused: carry the token
        body.append("csrfmiddlewaretoken", csrf(form));
        post(form.dataset.stop, body).then(function (r) {
          say(r.ok ? "Stopped: the turn keeps what streamed." : (r.data.detail || "Nothing to stop."), !r.ok);
        }).catch(function () { say("Could not reach Turnscope.", true); });
        return;
      }
      if (!prompt.value.trim()) { say("Type a prompt first.", true); prompt.focus(); return; }
      sending = true;
      refresh();
      say("Sending…");
      post(form.action, new FormData(form)).then(function (r) {
        sending = false;
        if (r.ok) {
          pending = { id: r.data.turn && r.data.turn.id, prompt: prompt.value, recorded: !!r.data.recorded };
          prompt.value = "";
          say("Sending: waiting for the provider…");
        } else {
          say(r.data.detail || ("Not sent (" + r.status + ")."), true);
        }
        refresh();
      }).catch(function () {
        sending = false;
        refresh();
        say("Could not reach Turnscope.", true);
      });
    });

    prompt.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        if (send && !send.disabled) form.requestSubmit(send);
      }
    });

    // New conversation and Fork land on #composer: the browser focuses the box (the link's
    // target) once the page has loaded, after this runs. Whatever focuses the box hands the
    // focus on to the prompt field, so typing goes there.
    var box = form.closest(".composer");
    if (box) {
      box.addEventListener("focus", function (e) {
        if (e.target === box && !prompt.disabled) prompt.focus();
      });
    }
    if (location.hash === "#composer" && !prompt.disabled) prompt.focus();
    refresh();
    // a turn that starts or ends streaming changes a section's data-status (or replaces it)
    var turns = document.getElementById("conversation");
    if (turns && window.MutationObserver) {
      new MutationObserver(refresh).observe(turns, {
        subtree: true, childList: true, attributes: true, attributeFilter: ["data-status"]
      });
    }
    setInterval(refresh, 1000);
  }

  document.querySelectorAll("form[data-composer], form[data-rerun]").forEach(models);
  document.querySelectorAll("form[data-composer]").forEach(composer);
})();
