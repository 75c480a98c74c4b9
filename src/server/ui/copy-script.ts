// /assets/copy.js: the console's only script. It reveals the Copy buttons next to one-time links
// and copies the field's text to the clipboard; without it the field is still selectable. Loaded
// from our own origin under `script-src 'self'`; it reads no cookie and sends nothing anywhere.

export const COPY_SCRIPT = `"use strict";
document.querySelectorAll("button[data-copy]").forEach(function (button) {
  var field = document.getElementById(button.getAttribute("data-copy"));
  if (!field || !navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(field.value).then(function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 2000);
    }, function () {
      field.select();
    });
  });
});
`;
