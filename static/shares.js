/* Shared links: each link's Copy button (shown only where script runs; the field is readonly
 * and selectable without it). */
(function () {
  "use strict";

  function copied(button, text) {
    var status = button.parentNode.querySelector(".copy-status");
    if (status) status.textContent = text;
  }

  function copy(button) {
    var input = document.getElementById(button.getAttribute("data-copy"));
    if (!input) return;
    input.select();
    var done = navigator.clipboard && window.isSecureContext
      ? navigator.clipboard.writeText(input.value)
      : new Promise(function (resolve, reject) {
        (document.execCommand && document.execCommand("copy")) ? resolve() : reject();
      });
    done.then(function () { copied(button, "Copied"); },
              function () { copied(button, "Selected: press Ctrl+C to copy"); });
  }

  function init() {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.hidden = false;
      button.addEventListener("click", function () { copy(button); });
    });
    document.querySelectorAll("input[data-share-url]").forEach(function (input) {
      input.addEventListener("focus", function () { input.select(); });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
